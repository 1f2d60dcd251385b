"""The job as producers, middleware and handlers see it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import typing as t

from ._job_runtime import JobRuntime
from ._job_session import NO_SESSIONS
from ._progress import check_progress
from ._progress import progress_not_recorded

#: A JSON object: what a payload and the correlation fields are.
JSONObject: t.TypeAlias = dict[str, t.Any]


@dataclasses.dataclass
class Job:
    """One job on its way to SQS (producer side) or back from it (consumer side).

    Middleware may change ``correlation_fields`` and ``trace_headers`` in
    ``produce`` before calling the next middleware; they travel as message
    attributes. ``job_id`` identifies the job for its whole life (set at
    enqueue, kept across re-sends). ``message_id`` and ``receive_count`` are
    only set on the consumer side.
    """

    #: The name that selects the handler.
    job_type: str
    #: The handler's argument, a JSON object.
    payload: JSONObject
    #: The logical queue name, as configured in the :class:`QueueGroup`.
    queue: str
    #: Untrusted key/values for logs (a request id, ...); never use them for
    #: authorisation or tenant selection.
    correlation_fields: JSONObject = dataclasses.field(default_factory=dict)
    #: Trace propagation headers (``traceparent``, ``sentry-trace``, ...), one
    #: String message attribute each.
    trace_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The SQS MessageId (consumer side).
    message_id: str | None = None
    #: How many times SQS delivered this message, this time included
    #: (consumer side).
    receive_count: int | None = None
    #: When SQS accepted the message (its SentTimestamp), in seconds since the
    #: epoch (consumer side; None when SQS did not say).
    sent_at: float | None = None
    #: The job's id, 1-128 characters of ``A-Za-z0-9_.:-``: set at enqueue (a
    #: random id or the caller's ``job_id=``) and kept across every re-send; a
    #: message without a valid one gets its SQS MessageId (consumer side).
    job_id: str | None = None
    #: A periodic job's tick (aware, UTC); None for other jobs (consumer side).
    scheduled_for: dt.datetime | None = None
    #: Set when the job passes its maximum runtime or the worker's shutdown
    #: deadline: a long handler may check it between steps and stop early.
    abort_requested: threading.Event = dataclasses.field(
        default_factory=threading.Event, repr=False, compare=False
    )
    #: Set when the job was cancelled (``jobs.cancel``) while it ran, within
    #: one heartbeat; ``abort_requested`` is set with it. Use
    #: :meth:`request_cancel` to set both.
    cancel_requested: threading.Event = dataclasses.field(
        default_factory=threading.Event, repr=False, compare=False
    )
    #: How many attempts the job gets: the smaller of its handler's
    #: ``Retry.max_attempts`` and the queue's ``maxReceiveCount``; None when
    #: neither limits it (consumer side).
    max_attempts: int | None = None
    #: The job's own runtime limit in seconds (``max_runtime_seconds=`` at
    #: enqueue, from the body on the consumer side), or None. It only ever
    #: shortens the handler's and queue's limit.
    max_runtime_seconds: float | None = None
    #: A unique job's key as stored (``unique=`` / ``unique_key=`` at
    #: enqueue, from the body on the consumer side), or None.
    unique_key: str | None = None
    #: When the worker frees that key: ``"started"`` or ``"finished"``.
    unique_until: str | None = None
    #: The job's tags (``tags=`` at enqueue, from the body on the consumer
    #: side): searchable in its record (``jobs.find_jobs(tag=...)``).
    tags: tuple[str, ...] = ()

    def request_cancel(self) -> None:
        """Ask the job to stop: set ``cancel_requested`` and ``abort_requested``."""
        self.cancel_requested.set()
        self.abort_requested.set()

    @property
    def attempt(self) -> int | None:
        """This attempt's number, 1 for the first: the ``receive_count``."""
        return self.receive_count

    #: What the running job reaches in the worker (its session, progress sink
    #: and lease renewal): set by the job runner, None outside a handler.
    _runtime: JobRuntime | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def session(self) -> t.Any:
        """A SQLAlchemy session on the store's database, for this job only.

        Opened on first access, committed by the worker when the handler
        returns (together with an idempotent job's key completion), rolled
        back when it raises, and closed after the job. Do not commit it
        yourself. Raises ``RuntimeError`` without a SQL job store.
        """
        if self._runtime is None:
            raise RuntimeError(NO_SESSIONS)
        return self._runtime.session.get()

    @property
    def batch(self) -> t.Any:
        """The running child's batch (``jobs.batch``): ``batch.add(signature)``
        adds a child; None when the job is no batch's child."""
        return None if self._runtime is None else self._runtime.batch

    @property
    def batch_id(self) -> str | None:
        """The id of the batch the running job is a child of, or None."""
        return getattr(self.batch, "batch_id", None)

    def set_progress(self, fraction: float, message: str | None = None) -> None:
        """Record how far the running job is: ``fraction`` from 0 to 1.

        Updates the job's record when job records are on (a store is
        configured); otherwise does nothing. ``message`` (optional) is kept
        escaped and cut to 500 characters.

        :raises ValueError: ``fraction`` is not a finite number from 0 to 1.
        """
        checked, shown = check_progress(fraction, message)
        if self._runtime is None:
            progress_not_recorded(checked)
            return
        self._runtime.report_progress(checked, shown)
