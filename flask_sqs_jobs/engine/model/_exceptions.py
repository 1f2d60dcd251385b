"""Exceptions raised by the queue engine, and those handlers raise to steer it.

Misuse (a bad argument, an unknown queue name) raises a builtin ``TypeError`` or
``ValueError``. Runtime conditions a caller may want to catch derive from
:class:`SQSJobsError`::

    Exception
    ├── SQSJobsError
    │   ├── EnqueueBatchError      SQS refused some entries of enqueue_many()
    │   └── QueueNotFoundError     SQS has no queue of the configured name (also
    │                              a ValueError)
    ├── NonRetryableError          raised by a handler: delete the message, no retry
    │   └── IdempotencyConflictError  an idempotency key reused with another payload
    ├── RetryJob                   raised by a handler: retry after a chosen delay
    └── UnknownQueueError          (also a KeyError and a ValueError)

``NonRetryableError`` and ``RetryJob`` are ordinary ``Exception`` subclasses, so a
broad ``except Exception`` inside a handler swallows them: re-raise them there.
"""

from __future__ import annotations

import collections.abc as cabc


class SQSJobsError(Exception):
    """Base class for runtime errors raised by flask-sqs-jobs."""


class NonRetryableError(Exception):
    """Raised by a handler when retrying cannot succeed.

    The worker deletes the message at once; the outcome is ``delete``.
    """


class IdempotencyConflictError(NonRetryableError):
    """An idempotent job's key is held or completed for a different payload.

    The handler does not run; the message is dead-lettered with this reason
    where the queue has a dead-letter queue, else deleted (outcome ``delete``).
    """

    def __init__(self, key: str, holder_job_id: str | None) -> None:
        #: The idempotency key (as the key function returned it).
        self.key = key
        #: The job that holds or completed the key.
        self.holder_job_id = holder_job_id
        super().__init__(
            f"idempotency key {key!r} is already used by job {holder_job_id!r} with a"
            " different payload; use a key that identifies the payload, or send the"
            " same payload"
        )


class RetryJob(Exception):
    """Raised by a handler to retry the job after ``delay_seconds``.

    The message is not deleted; it becomes visible again after the delay
    (at most 43,200 seconds, the SQS maximum). The outcome is ``retry``.

    :param delay_seconds: seconds until the message is visible again.
    """

    def __init__(self, delay_seconds: int = 0) -> None:
        if isinstance(delay_seconds, bool) or not isinstance(delay_seconds, int):
            raise TypeError(
                f"RetryJob delay_seconds must be an int; got {delay_seconds!r}"
            )
        if not 0 <= delay_seconds <= 43_200:
            raise ValueError(
                "RetryJob delay_seconds must be 0..43200 (the SQS maximum"
                f" visibility timeout); got {delay_seconds}"
            )
        super().__init__(f"retry in {delay_seconds} s")
        self.delay_seconds = delay_seconds


class UnknownQueueError(KeyError, ValueError):
    """A logical queue name that is not part of the :class:`QueueGroup`.

    It is a ``KeyError`` (a lookup by name failed) and a ``ValueError`` (the
    argument was wrong), so either ``except`` clause catches it.
    """

    def __init__(self, name: object, known: cabc.Iterable[str]) -> None:
        names = ", ".join(repr(n) for n in known) or "none"
        self.message = f"unknown queue {name!r}; the configured queues are: {names}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class EnqueueBatchError(SQSJobsError):
    """SQS refused some entries of an :meth:`~QueueGroup.enqueue_many` call.

    The entries in :attr:`enqueued` were sent; those in :attr:`failed` were not
    and may be sent again.
    """

    def __init__(
        self,
        enqueued: list[tuple[int, str]],
        failed: list[tuple[int, str, str]],
        total: int,
    ) -> None:
        #: ``(index, message_id)`` of each job that was sent, in input order.
        self.enqueued = enqueued
        #: ``(index, code, message)`` of each job SQS refused, with SQS's error
        #: code and message.
        self.failed = failed
        first = failed[0] if failed else None
        detail = f"; first: #{first[0]} {first[1]}: {first[2]}" if first else ""
        super().__init__(f"{len(failed)} of {total} jobs were not enqueued{detail}")


class QueueNotFoundError(SQSJobsError, ValueError):
    """SQS has no queue of the configured name."""

    def __init__(self, name: str, *, logical_name: str | None = None) -> None:
        #: The SQS queue name that was not found.
        self.queue_name = name
        where = f"queue {logical_name!r}: " if logical_name else ""
        super().__init__(
            f"{where}SQS has no queue named {name!r}. Create it (e.g. `flask"
            " sqs-jobs create-queues`) or fix the name in the configuration."
        )
