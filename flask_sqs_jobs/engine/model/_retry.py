"""Retry policies: how often a job type is tried, how long it waits between tries.

A :class:`Retry` belongs to a job type's handler. Settling asks it what a
failed attempt means (:func:`judge`) and how long to wait (:meth:`Retry.delay`);
the settler then applies the answer as it applies every other outcome.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random

from ._exceptions import RetryJob
from ._limits import is_finite_number
from ._limits import MAX_VISIBILITY_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Retry:
    """A retry policy for one job type, overriding its queue's retry backoff.

    Attempt ``n`` is the ``n``-th receive of the message (its
    ``receive_count``). After a failed attempt ``n < max_attempts`` the job
    waits ``min(max_backoff_seconds, backoff_seconds * 2 ** (n - 1))``
    seconds; with ``jitter`` a random value between half that and all of it
    ("equal jitter"), so jobs that failed together do not all come back
    together. Waits are whole seconds, at least 1, and never past what SQS
    allows for the receive (12 hours).

    :param max_attempts: receives the job gets; when the last one fails, the
        job is dead-lettered with its reason (deleted when the queue has no
        dead-letter queue).
    :param backoff_seconds: the wait after the first failed attempt.
    :param max_backoff_seconds: the longest wait.
    :param retry_on: the exception classes worth retrying; any other
        exception is treated as a :class:`NonRetryableError` (the job is
        deleted). :class:`RetryJob` always retries, after its own delay.
    :param jitter: randomise each wait as described above.
    """

    max_attempts: int = 5
    backoff_seconds: float = 30
    max_backoff_seconds: float = 3600
    retry_on: tuple[type[Exception], ...] = (Exception,)
    jitter: bool = True

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise TypeError(f"Retry max_attempts must be an int; got {attempts!r}")
        if attempts < 1:
            raise ValueError(
                f"Retry max_attempts must be at least 1 (one try); got {attempts}"
            )
        for name in ("backoff_seconds", "max_backoff_seconds"):
            value = getattr(self, name)
            if not is_finite_number(value) or value <= 0:
                raise ValueError(
                    f"Retry {name} must be a positive, finite number of seconds;"
                    f" got {value!r}"
                )
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError(
                "Retry max_backoff_seconds must be at least backoff_seconds; got"
                f" {self.max_backoff_seconds!r} < {self.backoff_seconds!r}"
            )
        retry_on = self.retry_on
        if not isinstance(retry_on, tuple) or not all(
            isinstance(cls, type) and issubclass(cls, Exception) for cls in retry_on
        ):
            raise TypeError(
                "Retry retry_on must be a tuple of Exception subclasses, e.g."
                f" (ConnectionError, TimeoutError); got {retry_on!r}"
            )
        if not isinstance(self.jitter, bool):
            raise TypeError(f"Retry jitter must be True or False; got {self.jitter!r}")

    def delay(self, attempt: int) -> int:
        """Seconds to wait after failed attempt ``attempt`` (1 for the first)."""
        # Bounded first, so that no receive count can overflow.
        exponent = min(max(0, attempt - 1), 64)
        ceiling = min(self.max_backoff_seconds, MAX_VISIBILITY_TIMEOUT)
        wait = min(ceiling, self.backoff_seconds * 2.0**exponent)
        if not self.jitter:
            return max(1, math.ceil(wait))
        low = max(1, math.ceil(wait / 2))
        return random.randint(low, max(low, math.floor(wait)))

    def retries(self, exception: BaseException | None) -> bool:
        """Whether ``exception`` is worth another attempt under this policy."""
        return isinstance(exception, (RetryJob, *self.retry_on))


class Verdict(enum.Enum):
    """What a failed attempt means under a retry policy."""

    #: Another attempt is due, after :meth:`Retry.delay`.
    RETRY = "retry"
    #: The exception is not in ``retry_on``: no attempt will do better.
    NOT_RETRYABLE = "not_retryable"
    #: The last attempt failed.
    EXHAUSTED = "exhausted"


def judge(policy: Retry, attempt: int, exception: BaseException | None) -> Verdict:
    """Return what failed attempt ``attempt`` (its receive count) means."""
    if not policy.retries(exception):
        return Verdict.NOT_RETRYABLE
    if attempt >= policy.max_attempts:
        return Verdict.EXHAUSTED
    return Verdict.RETRY


def max_attempts(policy: Retry | None, max_receive_count: int | None) -> int | None:
    """The attempts a job gets: the tighter of its policy and the queue's redrive."""
    limits = [] if policy is None else [policy.max_attempts]
    if max_receive_count is not None:
        limits.append(max_receive_count)
    return min(limits) if limits else None
