"""OTelMiddleware, observed through the OpenTelemetry SDK's in-memory span exporter."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs.contrib.otel import OTelMiddleware
from flask_sqs_jobs.engine.model._outcome import Outcome
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry import trace
from opentelemetry.propagators.textmap import default_getter
from opentelemetry.propagators.textmap import default_setter
from opentelemetry.propagators.textmap import Getter
from opentelemetry.propagators.textmap import Setter
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.contrib.helpers import JOB_TYPE
from tests.contrib.helpers import only_event

if t.TYPE_CHECKING:
    from structlog.typing import EventDict

    from tests.contrib.helpers import JobApp
    from tests.contrib.helpers import MakeJobApp


class TestTracerProvider(TracerProvider):
    """A tracer provider that keeps finished spans in memory (never set globally)."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.exporter = InMemorySpanExporter()
        self.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished_spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def provider() -> cabc.Iterator[TestTracerProvider]:
    provider = TestTracerProvider()
    yield provider
    provider.shutdown()


def only_span(spans: list[ReadableSpan], kind: trace.SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.kind == kind]
    assert len(found) == 1, found
    return found[0]


def traced_app(
    make_job_app: MakeJobApp, provider: TestTracerProvider, **options: bool
) -> JobApp:
    """A job app whose request runs in a server span, as Flask instrumentation makes."""
    job_app = make_job_app(OTelMiddleware(tracer_provider=provider, **options))
    tracer = provider.get_tracer("tests")
    job_app.around_enqueue = lambda: tracer.start_as_current_span(
        "POST /signup", kind=trace.SpanKind.SERVER
    )
    return job_app


def test_the_consumer_span_continues_the_producer_span(
    provider: TestTracerProvider, make_job_app: MakeJobApp, logs: list[EventDict]
) -> None:
    job_app = traced_app(make_job_app, provider)

    message_id = job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.SUCCESS]
    spans = provider.finished_spans()
    server = only_span(spans, trace.SpanKind.SERVER)
    producer = only_span(spans, trace.SpanKind.PRODUCER)
    consumer = only_span(spans, trace.SpanKind.CONSUMER)
    assert producer.parent is not None
    assert producer.parent.span_id == server.context.span_id
    assert producer.name == f"send {JOB_TYPE}"
    assert producer.attributes is not None
    assert producer.attributes["messaging.system"] == "aws_sqs"
    assert producer.attributes["messaging.destination.name"] == "default"
    assert producer.attributes["messaging.message.id"] == message_id

    assert consumer.name == f"process {JOB_TYPE}"
    assert consumer.context.trace_id == server.context.trace_id
    assert consumer.parent is not None
    assert consumer.parent.span_id == producer.context.span_id
    assert [link.context.span_id for link in consumer.links] == [
        producer.context.span_id
    ]
    assert consumer.attributes == {
        "messaging.system": "aws_sqs",
        "messaging.destination.name": "default",
        "messaging.operation": "process",
        "messaging.operation.type": "process",
        "messaging.message.id": message_id,
        "flask_sqs_jobs.job_type": JOB_TYPE,
        "flask_sqs_jobs.receive_count": 1,
    }
    assert consumer.status.status_code is trace.StatusCode.UNSET

    trace_id = trace.format_trace_id(consumer.context.trace_id)
    enqueued = only_event(logs, "job_enqueued")
    assert (enqueued["trace_id"], enqueued["span_id"]) == (
        trace_id,
        trace.format_span_id(producer.context.span_id),
    )
    for name in ("job_started", "job_finished"):
        event = only_event(logs, name)
        assert (event["trace_id"], event["span_id"]) == (
            trace_id,
            trace.format_span_id(consumer.context.span_id),
        )


def test_the_handler_sees_the_producers_baggage(
    provider: TestTracerProvider, make_job_app: MakeJobApp
) -> None:
    job_app = traced_app(make_job_app, provider)
    job_app.probe = lambda: baggage.get_baggage("tenant")

    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        job_app.signup()
    finally:
        otel_context.detach(token)
    job_app.work_off()

    assert job_app.probed == ["acme"]


class HeaderPropagator(TextMapPropagator):
    """Carries the trace id in one ``x-test-trace`` header, and records extractions."""

    def __init__(self) -> None:
        self.extracted: list[dict[str, str]] = []

    def inject(
        self,
        carrier: t.Any,
        context: otel_context.Context | None = None,
        setter: Setter[t.Any] = default_setter,
    ) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        setter.set(
            carrier, "x-test-trace", trace.format_trace_id(span_context.trace_id)
        )

    def extract(
        self,
        carrier: t.Any,
        context: otel_context.Context | None = None,
        getter: Getter[t.Any] = default_getter,
    ) -> otel_context.Context:
        self.extracted.append(dict(carrier))
        return context or otel_context.Context()

    @property
    def fields(self) -> set[str]:
        return {"x-test-trace"}


def test_the_applications_propagator_injects_and_extracts(
    provider: TestTracerProvider, make_job_app: MakeJobApp
) -> None:
    job_app = traced_app(make_job_app, provider)
    propagator = HeaderPropagator()
    default = propagate.get_global_textmap()
    propagate.set_global_textmap(propagator)
    try:
        job_app.signup()
        job_app.work_off()
    finally:
        propagate.set_global_textmap(default)

    producer = only_span(provider.finished_spans(), trace.SpanKind.PRODUCER)
    trace_id = trace.format_trace_id(producer.context.trace_id)
    assert propagator.extracted == [{"x-test-trace": trace_id}]


def test_handler_exceptions_are_recorded_and_set_an_error_status(
    provider: TestTracerProvider, make_job_app: MakeJobApp
) -> None:
    job_app = traced_app(make_job_app, provider)
    job_app.failure = ValueError("mail server down")

    job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.RETRY]
    assert finished[0].exception is job_app.failure
    consumer = only_span(provider.finished_spans(), trace.SpanKind.CONSUMER)
    assert consumer.status.status_code is trace.StatusCode.ERROR
    assert consumer.status.description == "ValueError: mail server down"
    [event] = consumer.events
    assert event.name == "exception"
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"


@pytest.mark.parametrize(
    ("failure", "report_non_retryable", "outcome", "reported"),
    [
        (NonRetryableError("no such user"), False, Outcome.DELETE, False),
        (NonRetryableError("no such user"), True, Outcome.DELETE, True),
        (RetryJob(delay_seconds=60), True, Outcome.RETRY, False),
    ],
)
def test_jobs_refused_on_purpose_are_errors_only_when_asked(
    provider: TestTracerProvider,
    make_job_app: MakeJobApp,
    failure: Exception,
    report_non_retryable: bool,
    outcome: Outcome,
    reported: bool,
) -> None:
    job_app = traced_app(
        make_job_app, provider, report_non_retryable=report_non_retryable
    )
    job_app.failure = failure

    job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [outcome]
    consumer = only_span(provider.finished_spans(), trace.SpanKind.CONSUMER)
    assert (consumer.status.status_code is trace.StatusCode.ERROR) is reported
    assert len(consumer.events) == (1 if reported else 0)


def test_a_job_without_trace_headers_starts_a_new_trace(
    provider: TestTracerProvider, make_job_app: MakeJobApp
) -> None:
    job_app = make_job_app(OTelMiddleware(tracer_provider=provider))
    job_app.jobs.queue_group(job_app.app).enqueue("default", JOB_TYPE, {})
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.SUCCESS]
    producer = only_span(provider.finished_spans(), trace.SpanKind.PRODUCER)
    consumer = only_span(provider.finished_spans(), trace.SpanKind.CONSUMER)
    assert producer.parent is None
    assert consumer.context.trace_id == producer.context.trace_id


def _broken(*args: object, **kwargs: object) -> t.NoReturn:
    raise RuntimeError("the SDK broke")


@pytest.mark.parametrize(
    ("phase", "target", "failure", "outcome"),
    [
        # Before the handler runs.
        ("consume", (propagate, "extract"), None, Outcome.SUCCESS),
        ("consume", (otel_context, "attach"), None, Outcome.SUCCESS),
        # While the handler's exception is recorded.
        ("consume", (SdkSpan, "record_exception"), ValueError("x"), Outcome.RETRY),
        # After the handler returned or raised.
        ("consume", (otel_context, "detach"), None, Outcome.SUCCESS),
        ("consume", (otel_context, "detach"), ValueError("x"), Outcome.RETRY),
        # Around the send.
        ("produce", (propagate, "inject"), None, Outcome.SUCCESS),
        ("produce", (trace, "format_span_id"), None, Outcome.SUCCESS),
    ],
)
def test_a_failing_sdk_never_changes_the_outcome_nor_reruns_the_handler(
    provider: TestTracerProvider,
    make_job_app: MakeJobApp,
    logs: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
    target: tuple[object, str],
    failure: Exception | None,
    outcome: Outcome,
) -> None:
    job_app = traced_app(make_job_app, provider)
    job_app.failure = failure

    with monkeypatch.context() as patch:
        if phase == "produce":
            patch.setattr(*target, _broken)
        job_app.signup()
    with monkeypatch.context() as patch:
        if phase == "consume":
            patch.setattr(*target, _broken)
        finished = job_app.work_off()

    assert [f.outcome for f in finished] == [outcome]
    assert finished[0].exception is failure
    assert len(job_app.calls) == 1
    failed = [e for e in logs if e["event"] == "integration_failed"]
    assert [(e["integration"], e["step"].split("_")[0]) for e in failed] == [
        ("opentelemetry", phase)
    ]
