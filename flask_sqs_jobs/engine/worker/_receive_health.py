"""Per-queue receive health: consecutive failures, backoff, and when to retry."""

from __future__ import annotations

import collections.abc as cabc
import random
import time

import botocore.exceptions

#: Consecutive receive failures after which a queue counts as broken; when
#: every queue is broken the worker gives up (exit status 1).
MAX_RECEIVE_FAILURES = 10
#: Cap of the receive-failure backoff, in seconds.
MAX_RECEIVE_BACKOFF = 30.0


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the endpoint could not be reached at all."""
    connection_errors = (
        botocore.exceptions.ConnectionError,
        botocore.exceptions.HTTPClientError,
    )
    return isinstance(error, connection_errors)


class QueueHealth:
    """Receive failures of one queue and when it may be polled again.

    Part of :class:`ReceiveHealth`: changed by the receiver, read by the
    receiving strategy and the worker, always under the worker state's lock.
    """

    __slots__ = ("endpoint", "failures", "last_error", "retry_at", "unreachable")

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.retry_at = 0.0
        self.last_error: str | None = None
        #: The last failure was a connection error, not an answer from SQS.
        self.unreachable = False

    def ready(self, now: float) -> bool:
        """Whether the queue's backoff is over at ``now`` (monotonic)."""
        return now >= self.retry_at

    def record_failure(self, error: BaseException, now: float) -> float:
        """Count a failure and return the (jittered, exponential) backoff."""
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"
        self.unreachable = is_unreachable(error)
        ceiling = min(MAX_RECEIVE_BACKOFF, 2.0 ** min(self.failures - 1, 64))
        backoff = random.uniform(ceiling / 2, ceiling)
        self.retry_at = now + backoff
        return backoff

    def record_success(self) -> int:
        """Forget past failures; return how many there were."""
        failures = self.failures
        self.failures = 0
        self.last_error = None
        self.unreachable = False
        return failures


class ReceiveHealth:
    """The health of every queue a worker polls.

    Owned by the :class:`~._receiver.Receiver`, which records each receive's
    success or failure; the receiving strategies ask which queues are ready,
    the polling loop whether every queue is broken, the health server for the
    failures and errors. Call its methods with the worker state's lock held.
    """

    def __init__(self, endpoints: cabc.Mapping[str, str]) -> None:
        self.queues = {name: QueueHealth(url) for name, url in endpoints.items()}

    def ready(self, name: str, now: float | None = None) -> bool:
        """Whether queue ``name`` may be polled now (its backoff is over)."""
        return self.queues[name].ready(time.monotonic() if now is None else now)

    def ready_names(self, names: cabc.Iterable[str]) -> list[str]:
        """Those of ``names`` that may be polled now, in the order given."""
        now = time.monotonic()
        return [n for n in names if self.queues[n].ready(now)]

    def next_ready_in(self) -> float | None:
        """Seconds until the first backed-off queue may be polled again, or None."""
        now = time.monotonic()
        waits = [h.retry_at - now for h in self.queues.values() if not h.ready(now)]
        return min(waits) if waits else None

    def any_unreachable(self) -> bool:
        """Whether some queue's last failure was a connection error."""
        return any(h.unreachable for h in self.queues.values())

    def bring_forward(self, endpoint: str) -> list[str]:
        """A receive through ``endpoint`` worked: retry its unreachable queues now.

        They share the endpoint that just answered, so their backoff would only
        keep them idle (and counting failures) while the endpoint is back.
        Returns the queues brought forward.
        """
        now = time.monotonic()
        brought = []
        for name, health in self.queues.items():
            if health.unreachable and health.endpoint == endpoint:
                health.unreachable = False
                if health.retry_at > now:
                    health.retry_at = now
                    brought.append(name)
        return brought

    def every_queue_broken(self) -> bool:
        """Whether every queue failed :data:`MAX_RECEIVE_FAILURES` times in a row."""
        return all(h.failures >= MAX_RECEIVE_FAILURES for h in self.queues.values())

    def failures(self) -> dict[str, int]:
        """Consecutive receive failures per queue."""
        return {name: h.failures for name, h in self.queues.items()}

    def errors(self) -> dict[str, str]:
        """The last error of each queue failing now."""
        return {
            name: h.last_error
            for name, h in self.queues.items()
            if h.failures and h.last_error is not None
        }
