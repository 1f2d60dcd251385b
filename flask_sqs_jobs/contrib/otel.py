"""OpenTelemetry tracing for jobs (the ``otel`` extra).

::

    from flask_sqs_jobs.contrib.otel import OTelMiddleware

    jobs = SQSJobs(middleware=[OTelMiddleware()])

Needs only ``opentelemetry-api`` (1.20 or later) at run time: spans go to
whatever tracer provider and propagator the application configures with the
OpenTelemetry SDK, and cost nothing when none is.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses

from ..engine.model import Job
from ..engine.model import JobMiddleware
from ._guard import bind_trace
from ._guard import is_reported
from ._guard import missing_sdk
from ._guard import traced
from ._guard import Vendor

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate
    from opentelemetry import trace
except ImportError as exc:
    raise missing_sdk(__name__, "opentelemetry-api", "otel") from exc

__all__ = ["OTelMiddleware"]

#: The instrumentation scope name of the spans this integration creates.
INSTRUMENTATION_NAME = "flask_sqs_jobs"
#: ``messaging.system`` for Amazon SQS, per the semantic conventions.
MESSAGING_SYSTEM = "aws_sqs"

_vendor = Vendor("opentelemetry")


class OTelMiddleware(JobMiddleware):
    """Trace jobs with OpenTelemetry, from the enqueue to the handler.

    On enqueue, a ``PRODUCER`` span (``send <job type>``) wraps the send, and
    the application's propagator (:func:`opentelemetry.propagate.inject`) adds
    its headers (``traceparent``, ...) to the job. On consume, each job runs
    in a ``CONSUMER`` span (``process <job type>``) whose parent is the
    producer's span, also added as a link, with the messaging semantic
    convention attributes (``messaging.system`` ``aws_sqs``,
    ``messaging.destination.name`` the logical queue, ``messaging.operation``
    ``process``, ``messaging.message.id``). A handler exception is recorded on
    the span and sets its status to error (see ``report_non_retryable``), then
    re-raised so the worker still decides the outcome. While a job runs, its
    log lines carry ``trace_id`` and ``span_id`` (hex).

    A failure inside OpenTelemetry is logged (``integration_failed``) and never
    changes a job's outcome.

    :param tracer_provider: the provider to take the tracer from; the global
        one (as set by the application) by default.
    :param report_non_retryable: also record
        :class:`~flask_sqs_jobs.NonRetryableError` (a job that cannot succeed)
        as an error. :class:`~flask_sqs_jobs.RetryJob` never is.
    """

    injects_trace_headers = True
    keeps_payload = True  # only trace headers and spans change

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        report_non_retryable: bool = False,
    ) -> None:
        self.report_non_retryable = report_non_retryable
        self._tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, tracer_provider=tracer_provider
        )

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        return traced(_vendor, "produce", job, call_next, self._start_send)

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        return traced(_vendor, "consume", job, call_next, self._start_process)

    def _start_send(self, job: Job, stack: contextlib.ExitStack) -> _SendSpan:
        span = self._tracer.start_span(
            f"send {job.job_type}",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.destination.name": job.queue,
                "messaging.operation": "publish",
                "messaging.operation.type": "send",
                "flask_sqs_jobs.job_type": job.job_type,
            },
        )
        stack.callback(span.end)
        stack.enter_context(
            trace.use_span(span, record_exception=False, set_status_on_exception=False)
        )
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        job.trace_headers.update(carrier)
        _bind_span(stack, span)
        return _SendSpan(span, report_non_retryable=True)

    def _start_process(self, job: Job, stack: contextlib.ExitStack) -> _ProcessSpan:
        parent = propagate.extract(job.trace_headers)
        producer = trace.get_current_span(parent).get_span_context()
        attributes: dict[str, str | int] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.destination.name": job.queue,
            "messaging.operation": "process",
            "messaging.operation.type": "process",
            "flask_sqs_jobs.job_type": job.job_type,
        }
        if job.message_id is not None:
            attributes["messaging.message.id"] = job.message_id
        if job.receive_count is not None:
            attributes["flask_sqs_jobs.receive_count"] = job.receive_count
        span = self._tracer.start_span(
            f"process {job.job_type}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            links=[trace.Link(producer)] if producer.is_valid else None,
            attributes=attributes,
        )
        stack.callback(span.end)
        # Attach the extracted context too, so the handler sees its baggage.
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        stack.callback(otel_context.detach, token)
        _bind_span(None, span)
        return _ProcessSpan(span, self.report_non_retryable)


def _bind_span(stack: contextlib.ExitStack | None, span: trace.Span) -> None:
    context = span.get_span_context()
    if context.is_valid:
        bind_trace(
            stack,
            trace.format_trace_id(context.trace_id),
            trace.format_span_id(context.span_id),
        )


@dataclasses.dataclass
class _Span:
    span: trace.Span
    report_non_retryable: bool

    def failed(self, error: Exception) -> None:
        if is_reported(error, report_non_retryable=self.report_non_retryable):
            self.span.record_exception(error)
            self.span.set_status(
                trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}")
            )


class _SendSpan(_Span):
    def succeeded(self, message_id: str) -> None:
        self.span.set_attribute("messaging.message.id", message_id)


class _ProcessSpan(_Span):
    def succeeded(self, result: None) -> None:
        pass
