"""The numbers everything is checked against: SQS's quotas and the engine's own bounds.

Quotas: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
"""

from __future__ import annotations

import math
import typing as t

#: Message attributes SQS accepts on one message.
MAX_MESSAGE_ATTRIBUTES = 10
#: The longest per-message delay SQS accepts (15 minutes).
MAX_DELAY_SECONDS = 900
#: The longest visibility timeout SQS accepts (12 hours).
MAX_VISIBILITY_TIMEOUT = 43_200
#: The longest long-poll wait SQS accepts.
MAX_WAIT_SECONDS = 20
#: Entries in one SendMessageBatch, DeleteMessageBatch or
#: ChangeMessageVisibilityBatch request, and messages in one ReceiveMessage.
MAX_BATCH_ENTRIES = 10
#: The longest queue name SQS accepts, the ``.fifo`` suffix included.
MAX_QUEUE_NAME_LENGTH = 80
#: The queue default for MaximumMessageSize (1 MiB), used when the queue's own
#: setting cannot be read.
DEFAULT_MAX_MESSAGE_SIZE = 1_048_576
#: The longest MessageGroupId / MessageDeduplicationId SQS accepts.
MAX_ID_LENGTH = 128
#: How far ahead a job may be deferred (``run_at`` or ``delay_seconds``): one
#: year. A deferred job is re-sent every 15 minutes until due, so a date
#: decades ahead (a unit mix-up, milliseconds for seconds) would cost SQS
#: calls for ever instead of failing where it was made.
MAX_DEFERRAL_SECONDS = 365 * 24 * 3600


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is an int or float (not a bool) that is a finite float.

    NaN compares false with everything, so it would slip past every range
    check (a NaN runtime limit never fires); infinities and ints too large for
    a float overflow the arithmetic done with them.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


#: The longest a job may ask to run (``max_runtime_seconds=`` at enqueue): SQS
#: keeps a received message invisible for at most 12 hours in all.
MAX_JOB_RUNTIME_SECONDS = MAX_VISIBILITY_TIMEOUT


def job_runtime_problem(value: object) -> str | None:
    """Why ``value`` is no job's ``max_runtime_seconds``, or None when it is one.

    A job's limit is a number (not a bool) above 0 and at most
    :data:`MAX_JOB_RUNTIME_SECONDS`; NaN and infinities are refused.
    """
    # A huge int's repr is refused past 4300 digits; its size says enough.
    shown = (
        f"an int of {value.bit_length()} bits"
        if isinstance(value, int) and value.bit_length() > 64
        else repr(value)
    )
    if not is_finite_number(value):
        return f"a finite number of seconds, not {type(value).__name__} {shown}"
    number = float(t.cast(float, value))
    if not 0 < number <= MAX_JOB_RUNTIME_SECONDS:
        return f"above 0 and at most {MAX_JOB_RUNTIME_SECONDS} (12 h), not {shown}"
    return None


def check_job_runtime(value: object) -> float | None:
    """Return a job's ``max_runtime_seconds`` (None: no limit of its own).

    :raises TypeError: it is not a number (a bool, a str, ...).
    :raises ValueError: it is not above 0 and at most 12 hours, or not finite.
    """
    if value is None:
        return None
    problem = job_runtime_problem(value)
    if problem is None:
        return float(t.cast(float, value))
    error = (
        ValueError
        if isinstance(value, int | float) and not isinstance(value, bool)
        else TypeError
    )
    raise error(
        f"max_runtime_seconds must be {problem}; pass the job's own limit in"
        " seconds (e.g. 300), or None for the handler's and queue's limit"
    )


def runtime_limit(
    handler_limit: float | None, queue_limit: float, job_limit: float | None
) -> float:
    """The limit a job runs under: its handler's (else its queue's), cut to its own.

    A job's own ``max_runtime_seconds`` can only shorten the limit, never
    lengthen it.
    """
    limit = handler_limit or queue_limit
    return limit if job_limit is None else min(limit, job_limit)


def is_int_in(value: object, low: int, high: int) -> t.TypeGuard[int]:
    """Whether ``value`` is an int (a bool is not) from ``low`` to ``high``."""
    return (
        isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    )


def check_worker_options(
    idle_wait_seconds: object, concurrency: object, shutdown_timeout: object
) -> None:
    """Refuse a worker's options that are wrong, saying what to pass instead."""
    if not is_int_in(idle_wait_seconds, 0, MAX_WAIT_SECONDS):
        raise ValueError(
            f"idle_wait_seconds must be an int 0..{MAX_WAIT_SECONDS} (the SQS"
            f" long-poll maximum); got {idle_wait_seconds!r}"
        )
    if (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or concurrency < 1
    ):
        raise ValueError(f"concurrency must be an int >= 1; got {concurrency!r}")
    if shutdown_timeout is not None and (
        not is_finite_number(shutdown_timeout) or t.cast(float, shutdown_timeout) < 0
    ):
        raise ValueError(
            "shutdown_timeout must be a finite number of seconds >= 0, or None to"
            f" wait for running jobs; got {shutdown_timeout!r}"
        )
