"""The outcome of processing one message, as logged, signalled and counted."""

from __future__ import annotations

import enum


class Outcome(enum.StrEnum):
    """What happened to a job's message once its handler was done."""

    #: The handler returned; the message was deleted.
    SUCCESS = "success"
    #: The handler raised (or raised :class:`RetryJob`); the message was left
    #: for redelivery.
    RETRY = "retry"
    #: The handler raised :class:`NonRetryableError`; the message was deleted.
    DELETE = "delete"
    #: The worker lost or gave up ownership of the message (a visibility
    #: extension failed, or the job ran past its maximum runtime); the message
    #: was not deleted and will be delivered again.
    HEARTBEAT_FAILED = "heartbeat_failed"
    #: The job was done but deleting its message failed; it may run again.
    DELETE_FAILED = "delete_failed"
    #: The job failed on its last allowed receive and was moved to the
    #: dead-letter queue with its reason.
    DEAD_LETTERED = "dead_lettered"
    #: The job is scheduled for later than SQS can delay; it was sent again
    #: with the remaining delay.
    DEFERRED = "deferred"
    #: The job's idempotency key was already completed (a duplicate delivery or
    #: enqueue); the message was deleted without running the handler.
    DUPLICATE = "duplicate"
    #: The job was received after its ``expires_at``; the message was deleted
    #: without running the handler.
    EXPIRED = "expired"
    #: The job was cancelled (``jobs.cancel``): deleted unrun when it arrived,
    #: or stopped while it ran (``current_job.cancel_requested``).
    CANCELLED = "cancelled"
    #: A limit of the handler (``limits=[...]``) refused the job: it did not
    #: run and comes back after a jittered delay; not a failed attempt.
    LIMITED = "limited"
