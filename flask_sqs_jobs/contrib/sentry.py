"""Sentry tracing and error reporting for jobs (the ``sentry`` extra).

::

    import sentry_sdk
    from flask_sqs_jobs.contrib.sentry import SentryMiddleware

    sentry_sdk.init(dsn=..., traces_sample_rate=0.2)
    jobs = SQSJobs(middleware=[SentryMiddleware()])

Supports sentry-sdk 2.15 and later 2.x releases (the span ``name`` argument
appeared in 2.15). With sentry-sdk's Flask integration, the request that
enqueues a job and the job itself share one trace.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import time
import typing as t

from ..engine.model import Job
from ..engine.model import JobMiddleware
from ._guard import bind_trace
from ._guard import is_reported
from ._guard import missing_sdk
from ._guard import parse_traceparent
from ._guard import traced
from ._guard import Vendor
from ._sentry_scrub import install_global_processor
from ._sentry_scrub import job_processor
from ._sentry_scrub import Needles
from ._sentry_scrub import needles_of
from ._sentry_scrub import remember

try:
    import sentry_sdk
    from sentry_sdk.utils import event_from_exception
except ImportError as exc:
    raise missing_sdk(__name__, "sentry-sdk", "sentry") from exc

if not sentry_sdk.VERSION.startswith("2."):
    raise ImportError(
        f"{__name__} needs sentry-sdk 2.x (2.15 or later); {sentry_sdk.VERSION} is"
        " installed, whose tracing API it does not support yet. Install it with:"
        ' pip install "flask-sqs-jobs[sentry]" (or "sentry-sdk>=2.15,<3")'
    )

if t.TYPE_CHECKING:
    from sentry_sdk.tracing import Span

__all__ = ["SentryMiddleware"]

#: The ``origin`` of the spans this integration creates.
ORIGIN = "auto.queue.flask_sqs_jobs"
#: ``messaging.system`` for Amazon SQS.
MESSAGING_SYSTEM = "aws_sqs"

_vendor = Vendor("sentry")


class SentryMiddleware(JobMiddleware):
    """Trace jobs from the enqueue to the handler, and report handler errors.

    On enqueue, adds the ``sentry-trace`` and ``baggage`` headers to the job
    (inside a ``queue.publish`` span when a transaction is active, such as the
    request's). On consume, each job gets a fresh isolation scope and a
    ``queue.process`` transaction named after its job type that continues the
    producer's trace, with the ``messaging.*`` data of Sentry's Queues module.
    The handler's exception is reported, then re-raised so the worker still
    decides the outcome. While a job runs, its log lines carry ``trace_id`` and
    ``span_id``.

    A failure inside sentry-sdk is logged (``integration_failed``) and never
    changes a job's outcome.

    Job payloads are kept out of Sentry events by default, although
    sentry-sdk records local variables (``include_local_variables=True``):
    the variables of the library's own frames are dropped, and any string of
    an event about a job that contains one of its payload's values (strings
    and numbers of at least four characters) becomes ``[Filtered]``, in the
    handler's frames, the exception message, breadcrumbs, contexts and extra.

    :param report_non_retryable: also report :class:`~flask_sqs_jobs.NonRetryableError`
        (a job that cannot succeed). :class:`~flask_sqs_jobs.RetryJob` is never
        reported.
    :param send_payloads: let payloads reach Sentry as sentry-sdk would send
        them (opt in only where Sentry may hold what jobs carry).
    """

    injects_trace_headers = True
    keeps_payload = True  # only trace headers and spans change

    def __init__(
        self, *, report_non_retryable: bool = False, send_payloads: bool = False
    ) -> None:
        self.report_non_retryable = report_non_retryable
        self.send_payloads = send_payloads
        if not send_payloads:
            _vendor.call(
                "install",
                install_global_processor,
                sentry_sdk.get_global_scope().add_event_processor,
            )

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        return traced(_vendor, "produce", job, call_next, _start_publish)

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        return traced(_vendor, "consume", job, call_next, self._start_process)

    def _start_process(self, job: Job, stack: contextlib.ExitStack) -> _Process:
        scope = stack.enter_context(sentry_sdk.isolation_scope())
        scope.clear_breadcrumbs()
        needles: Needles | None = None
        if not self.send_payloads:
            needles = needles_of(job)
            scope.add_event_processor(t.cast(t.Any, job_processor(needles)))
        scope.set_tag("job_type", job.job_type)
        scope.set_context(
            "sqs_job",
            {
                "job_type": job.job_type,
                "queue": job.queue,
                "message_id": job.message_id,
                "receive_count": job.receive_count,
            },
        )
        transaction = sentry_sdk.continue_trace(
            dict(job.trace_headers),
            op="queue.process",
            name=job.job_type,
            source="task",
        )
        transaction.origin = ORIGIN
        for key, value in _messaging_data(job).items():
            transaction.set_data(key, value)
        stack.enter_context(
            sentry_sdk.start_transaction(
                transaction,
                custom_sampling_context={
                    "sqs_job": {"job_type": job.job_type, "queue": job.queue}
                },
            )
        )
        bind_trace(None, transaction.trace_id, transaction.span_id)
        return _Process(transaction, self.report_non_retryable, needles)


def _messaging_data(job: Job) -> dict[str, t.Any]:
    data: dict[str, t.Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.message_id,
    }
    if job.receive_count is not None:
        data["messaging.message.retry.count"] = job.receive_count - 1
    if job.sent_at is not None:
        latency_ms = max(0.0, (time.time() - job.sent_at) * 1000)
        data["messaging.message.receive.latency"] = round(latency_ms, 3)
    return data


def _start_publish(job: Job, stack: contextlib.ExitStack) -> _Publish:
    span: Span | None = None
    if sentry_sdk.get_current_span() is not None:
        span = stack.enter_context(
            sentry_sdk.start_span(op="queue.publish", name=job.job_type, origin=ORIGIN)
        )
        span.set_data("messaging.system", MESSAGING_SYSTEM)
        span.set_data("messaging.destination.name", job.queue)
    traceparent = sentry_sdk.get_traceparent()
    baggage = sentry_sdk.get_baggage()
    if traceparent:
        job.trace_headers["sentry-trace"] = traceparent
    if baggage:
        job.trace_headers["baggage"] = baggage
    ids = _trace_ids(traceparent)
    if ids is not None:
        bind_trace(stack, *ids)
    return _Publish(span)


def _trace_ids(sentry_trace: str | None) -> tuple[str, str] | None:
    """Return (trace id, span id) of a ``sentry-trace`` header value."""
    if not sentry_trace:
        return None
    # sentry-trace is "<trace id>-<span id>[-<sampled>]", the W3C ids without
    # the version and flags.
    return parse_traceparent(f"00-{sentry_trace[:49]}-00")


@dataclasses.dataclass
class _Publish:
    span: Span | None

    def succeeded(self, message_id: str) -> None:
        if self.span is not None:
            self.span.set_data("messaging.message.id", message_id)

    def failed(self, error: Exception) -> None:
        if self.span is not None:
            self.span.set_status("internal_error")


@dataclasses.dataclass
class _Process:
    transaction: Span
    report_non_retryable: bool
    needles: Needles | None

    def succeeded(self, result: None) -> None:
        self.transaction.set_status("ok")

    def failed(self, error: Exception) -> None:
        if self.needles is not None:
            remember(error, self.needles)
        if not is_reported(error, report_non_retryable=self.report_non_retryable):
            # RetryJob (run again later) or NonRetryableError (dropped on
            # purpose): the handler decided, nothing to alert on.
            self.transaction.set_status("cancelled")
            return
        self.transaction.set_status("internal_error")
        client = sentry_sdk.get_client()
        event, hint = event_from_exception(
            error,
            client_options=client.options,
            mechanism={"type": "flask_sqs_jobs", "handled": False},
        )
        sentry_sdk.capture_event(event, hint=hint)
