"""A received message the worker holds: read once from ReceiveMessage's answer."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import structlog

from ..model import job_runtime_problem
from ..model import loggable_text
from ..model import MAX_DEFERRAL_SECONDS
from ..sqs import CallError
from ..sqs import DecodedBody
from ..sqs import parse_run_at
from ..sqs import SqsQueue
from ._heartbeat import Lease

# The run_at lines keep the logger they had when phase one read run_at itself.
log = structlog.get_logger("flask_sqs_jobs.engine.worker._running")


class Delivery:
    """One received message, from its receive until it is settled.

    Everything the engine needs from the message is read here, once:
    identifiers, the receive count and the send time (both tolerate servers
    that send nonsense), and the group id of a FIFO message.

    Created by the receiver and never changed after: it is handed from the
    receive thread to the worker state (held), a slot thread (run and
    settled) and, for an abandoning shutdown, read from the state's running
    jobs. Its body and attributes are untrusted text. Its lease is the
    heartbeat's.
    """

    __slots__ = (
        "attributes",
        "body",
        "group_id",
        "lease",
        "message_id",
        "queue",
        "queue_name",
        "receipt_handle",
        "receive_count",
        "received_at",
        "runtime_cap",
        "sent_at_ms",
    )

    def __init__(
        self,
        queue_name: str,
        queue: SqsQueue,
        message: cabc.Mapping[str, t.Any],
        lease: Lease,
    ) -> None:
        self.queue_name = queue_name
        self.queue = queue
        self.lease = lease
        self.receipt_handle = lease.receipt_handle
        self.message_id = lease.message_id
        self.received_at = lease.received_at
        self.body: object = message.get("Body")
        attributes = message.get("MessageAttributes")
        #: The message attributes as received (untrusted).
        self.attributes: object = attributes
        system = message.get("Attributes")
        system = system if isinstance(system, dict) else {}
        self.receive_count = _int_or(system.get("ApproximateReceiveCount"), 1)
        #: When SQS accepted the message (SentTimestamp), in epoch milliseconds.
        self.sent_at_ms: int | None = _int_or(system.get("SentTimestamp"), None)
        group_id = system.get("MessageGroupId")
        self.group_id: str | None = group_id if isinstance(group_id, str) else None
        #: Seconds the job may run at most, whatever its limits say (an AWS
        #: Lambda function's remaining time); None: its limits alone.
        self.runtime_cap: float | None = None

    @property
    def sent_at(self) -> float | None:
        """When SQS accepted the message, in epoch seconds (None if unknown)."""
        return None if self.sent_at_ms is None else self.sent_at_ms / 1000

    def delete(self, *, linger: float = 0.0) -> CallError:
        """Delete the message now (the settler, once the job is done with it).

        DeleteMessage on its queue, which group-commits concurrent deletes;
        ``linger`` is how long it may wait to share a request. An AWS Lambda
        record's message is deleted by its event source mapping instead.
        """
        return self.queue.delete(self.receipt_handle, linger=linger)

    def __repr__(self) -> str:
        return f"<Delivery {self.queue_name!r} {self.message_id!r}>"


_T = t.TypeVar("_T", int, None)


def _int_or(value: object, default: _T) -> int | _T:
    """``value`` as an int, or ``default`` when it is not one (an odd server)."""
    try:
        return int(t.cast(t.Any, value))
    except (TypeError, ValueError, OverflowError):
        return default


def identifiers(message: cabc.Mapping[str, t.Any]) -> tuple[str, str]:
    """Return ``(receipt handle, message id)`` of a received message, as str."""
    return str(message.get("ReceiptHandle", "")), str(message.get("MessageId", ""))


def due_time(decoded: DecodedBody, delivery: Delivery) -> dt.datetime | None:
    """Return ``run_at`` if the job is not due yet (more than a second ahead)."""
    if decoded.run_at is None or delivery.queue.is_fifo:
        return None
    run_at = parse_run_at(decoded.run_at)
    if run_at is None:
        log.warning("run_at_invalid", run_at=loggable_text(decoded.run_at, 64))
        return None
    ahead = (run_at - dt.datetime.now(dt.UTC)).total_seconds()
    if ahead <= 1:
        return None
    if ahead > MAX_DEFERRAL_SECONDS:
        # Another producer's run_at further ahead than enqueue allows would be
        # re-sent every 15 minutes for years: run it now instead, and say so.
        log.warning(
            "run_at_too_far",
            run_at=loggable_text(decoded.run_at, 64),
            max_deferral_seconds=MAX_DEFERRAL_SECONDS,
        )
        return None
    return run_at


def received_runtime(value: object) -> float | None:
    """A body's ``max_runtime_seconds``: the job's own limit, or None.

    A value enqueue would refuse (another producer's) is ignored with a
    warning: the job still runs, under its handler's and queue's limit.
    """
    if value is None:
        return None
    if job_runtime_problem(value) is not None:
        log.warning(
            "max_runtime_invalid",
            sent_max_runtime_seconds=loggable_text(repr(value), 64),
        )
        return None
    return float(t.cast(float, value))


def expired_at(decoded: DecodedBody) -> dt.datetime | None:
    """The body's ``expires_at`` when it has passed; None: the job may run.

    A value that is no ISO 8601 time with a zone (another producer's) is
    ignored with a warning: the job runs.
    """
    value = decoded.expires_at
    if value is None:
        return None
    expires_at = parse_run_at(value) if isinstance(value, str) else None
    if expires_at is None:
        log.warning(
            "expires_at_invalid", sent_expires_at=loggable_text(repr(value), 64)
        )
        return None
    return expires_at if expires_at <= dt.datetime.now(dt.UTC) else None
