"""The job as producers, middleware and handlers see it."""

from __future__ import annotations

import dataclasses
import threading
import typing as t

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
    #: Set when the job passes its maximum runtime or the worker's shutdown
    #: deadline: a long handler may check it between steps and stop early.
    abort_requested: threading.Event = dataclasses.field(
        default_factory=threading.Event, repr=False, compare=False
    )

    def set_progress(self, fraction: float, message: str | None = None) -> None:
        """Record how far the running job is: ``fraction`` from 0 to 1.

        Updates the job's record when job records are on (a store is
        configured); otherwise does nothing. ``message`` (optional) is kept
        escaped and cut to 500 characters.

        :raises ValueError: ``fraction`` is not a finite number from 0 to 1.
        """
        from ._progress import report_progress

        report_progress(self, fraction, message)
