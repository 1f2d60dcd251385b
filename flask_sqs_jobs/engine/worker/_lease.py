"""A visibility lease: one received message the worker holds, and its 12 hours."""

from __future__ import annotations

import math
import threading
import time

from ..model import JobRuntime
from ..sqs import SqsQueue

MAX_RUNTIME_EXCEEDED = "max_runtime_exceeded"
VISIBILITY_WINDOW_ENDED = "visibility_window_ended"

#: SQS refuses a visibility that ends more than 12 hours after the receive.
VISIBILITY_WINDOW_SECONDS = 43_200
#: Seconds of that window kept in hand: a change reaches SQS a little after it
#: is computed (batching, latency, a retried call). ``received_at`` is read
#: before ReceiveMessage is sent, so the receive itself errs on the safe side.
WINDOW_MARGIN_SECONDS = 10


class Lease:
    """One received message the worker holds, running or waiting for a slot.

    While a lease is tracked, the heartbeat extends the message's visibility
    every ``visibility_timeout * heartbeat_fraction`` seconds (its queue's),
    never past the 12 hours SQS grants a receive. A lease fails when an
    extension fails, its job runs past ``max_runtime_seconds`` or those 12
    hours end; from then on the worker no longer owns the message and must
    not delete it.

    Owned by the :class:`~._heartbeat.Heartbeat` that created it
    (``Heartbeat.hold``): the message it names and its timeout are fixed at
    creation; the rest (tracked, in flight, next due, deadline, failure,
    settling, abort, runtime) changes only in the heartbeat, under its
    condition. Everyone else (the worker state, the runner, the settler, the
    shutdown) reads it and asks the heartbeat for a change (``start_job``,
    ``freeze``, ``drop``, ``abandon``). ``failed`` may be read without the
    lock: once set it never goes back.
    """

    __slots__ = (
        "abort",
        "failure",
        "in_flight",
        "interval",
        "job_deadline",
        "message_id",
        "next_due",
        "queue",
        "queue_name",
        "receipt_handle",
        "received_at",
        "runtime",
        "settling",
        "tracked",
        "visibility_timeout",
        "window_from",
    )

    def __init__(
        self,
        queue: SqsQueue,
        queue_name: str,
        receipt_handle: str,
        message_id: str,
        received_at: float,
        *,
        window_from: float | None = None,
    ) -> None:
        self.queue = queue
        self.queue_name = queue_name
        self.receipt_handle = receipt_handle
        self.message_id = message_id
        self.received_at = received_at
        #: When SQS's 12 hours began: the receive, or earlier when the message
        #: was received by someone else first (an AWS Lambda event source
        #: mapping, up to its batching window before the invocation).
        self.window_from = received_at if window_from is None else window_from
        self.visibility_timeout = queue.visibility_timeout or 0
        self.interval = self.visibility_timeout * queue.heartbeat_fraction
        self.next_due = received_at + self.interval
        self.job_deadline: float | None = None
        self.abort: threading.Event | None = None
        #: Why the worker lost the message (an error or MAX_RUNTIME_EXCEEDED).
        self.failure: str | None = None
        self.tracked = False
        self.in_flight = False
        #: Its job is over and the message is being deleted (see Heartbeat.freeze).
        self.settling = False
        #: The runtime of the job running under this lease: renewed (on a pool
        #: of the heartbeat's) after each extension, with the seconds granted.
        self.runtime: JobRuntime | None = None

    @property
    def failed(self) -> bool:
        """Whether the worker lost the message (see :attr:`failure`)."""
        return self.failure is not None

    @property
    def window_closes_at(self) -> float:
        """When (monotonic) the last visibility SQS grants this receive ends."""
        return self.window_from + VISIBILITY_WINDOW_SECONDS - WINDOW_MARGIN_SECONDS

    def visibility_left(self, now: float | None = None) -> float:
        """Seconds until the message's visibility ends, as last extended."""
        now = time.monotonic() if now is None else now
        last_extended = self.next_due - self.interval
        return max(0.0, last_extended + self.visibility_timeout - now)

    def cap_visibility(self, seconds: int, now: float | None = None) -> int:
        """``seconds``, cut to the whole seconds left of this receive's 12 hours."""
        now = time.monotonic() if now is None else now
        return max(0, min(seconds, math.floor(self.window_closes_at - now)))
