"""SentryMiddleware, observed through a sentry-sdk transport that records envelopes."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
import sentry_sdk
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs.contrib.sentry import SentryMiddleware
from flask_sqs_jobs.engine.model._outcome import Outcome
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.flask import FlaskIntegration
from sentry_sdk.tracing import Transaction
from sentry_sdk.transport import Transport

from tests.contrib.helpers import JOB_TYPE
from tests.contrib.helpers import only_event

if t.TYPE_CHECKING:
    from structlog.typing import EventDict

    from tests.contrib.helpers import MakeJobApp

Event: t.TypeAlias = dict[str, t.Any]


class RecordingTransport(Transport):
    """Keeps every envelope the SDK sends, instead of sending it."""

    def __init__(self) -> None:
        super().__init__()
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def items(self, kind: str) -> list[Event]:
        return [
            t.cast("Event", item.payload.json)
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == kind
        ]

    def transactions(self, op: str) -> list[Event]:
        return [
            e for e in self.items("transaction") if e["contexts"]["trace"]["op"] == op
        ]

    def errors(self) -> list[Event]:
        return self.items("event")


@pytest.fixture
def sentry() -> cabc.Iterator[RecordingTransport]:
    """sentry-sdk initialised as an app would, sending to a recording transport."""
    transport = RecordingTransport()
    sentry_sdk.init(
        dsn="https://public@sentry.invalid/1",
        transport=transport,
        traces_sample_rate=1.0,
        integrations=[FlaskIntegration()],
    )
    try:
        yield transport
    finally:
        sentry_sdk.get_client().close()
        sentry_sdk.get_global_scope().set_client(None)


def only(events: list[Event]) -> Event:
    assert len(events) == 1, events
    return events[0]


def test_the_job_continues_the_request_trace_in_a_queue_process_transaction(
    sentry: RecordingTransport, make_job_app: MakeJobApp, logs: list[EventDict]
) -> None:
    job_app = make_job_app(SentryMiddleware())

    message_id = job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.SUCCESS]
    request = only(sentry.transactions("http.server"))
    publish = only([s for s in request["spans"] if s["op"] == "queue.publish"])
    assert publish["description"] == JOB_TYPE
    assert publish["data"]["messaging.destination.name"] == "default"
    assert publish["data"]["messaging.message.id"] == message_id
    assert publish["data"]["messaging.system"] == "aws_sqs"

    job = only(sentry.transactions("queue.process"))
    trace = job["contexts"]["trace"]
    assert job["transaction"] == JOB_TYPE
    assert job["transaction_info"] == {"source": "task"}
    assert trace["trace_id"] == request["contexts"]["trace"]["trace_id"]
    assert trace["parent_span_id"] == publish["span_id"]
    assert trace["status"] == "ok"
    data = trace["data"]
    assert data["messaging.message.id"] == message_id
    assert data["messaging.destination.name"] == "default"
    assert data["messaging.system"] == "aws_sqs"
    assert data["messaging.message.retry.count"] == 0
    assert data["messaging.message.receive.latency"] >= 0

    enqueued = only_event(logs, "job_enqueued")
    assert (enqueued["trace_id"], enqueued["span_id"]) == (
        trace["trace_id"],
        publish["span_id"],
    )
    for name in ("job_started", "job_finished"):
        event = only_event(logs, name)
        assert (event["trace_id"], event["span_id"]) == (
            trace["trace_id"],
            trace["span_id"],
        )


def test_in_eager_mode_the_job_transaction_continues_the_request_trace(
    sentry: RecordingTransport, make_job_app: MakeJobApp, logs: list[EventDict]
) -> None:
    job_app = make_job_app(SentryMiddleware(), eager=True)

    job_app.signup()

    assert len(job_app.calls) == 1
    request = only(sentry.transactions("http.server"))
    job = only(sentry.transactions("queue.process"))
    publish = only([s for s in request["spans"] if s["op"] == "queue.publish"])
    assert (
        job["contexts"]["trace"]["trace_id"] == request["contexts"]["trace"]["trace_id"]
    )
    assert job["contexts"]["trace"]["parent_span_id"] == publish["span_id"]
    assert (
        only_event(logs, "job_started")["span_id"]
        == (job["contexts"]["trace"]["span_id"])
    )


def test_without_a_transaction_the_headers_still_carry_the_trace(
    sentry: RecordingTransport, make_job_app: MakeJobApp
) -> None:
    job_app = make_job_app(SentryMiddleware())

    with job_app.app.app_context():
        job_app.jobs.enqueue("default", JOB_TYPE, {})
        trace_id = sentry_sdk.get_current_scope().get_traceparent()
    job_app.work_off()

    assert trace_id is not None
    job = only(sentry.transactions("queue.process"))
    assert job["contexts"]["trace"]["trace_id"] == trace_id.split("-")[0]


def test_handler_exceptions_are_reported_and_re_raised(
    sentry: RecordingTransport, make_job_app: MakeJobApp
) -> None:
    job_app = make_job_app(SentryMiddleware())
    job_app.failure = ValueError("mail server down")

    job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.RETRY]
    assert finished[0].exception is job_app.failure
    error = only(sentry.errors())
    exception = error["exception"]["values"][-1]
    assert exception["type"] == "ValueError"
    assert exception["value"] == "mail server down"
    assert exception["mechanism"] == {"type": "flask_sqs_jobs", "handled": False}
    job = only(sentry.transactions("queue.process"))
    assert (
        error["contexts"]["trace"]["trace_id"] == job["contexts"]["trace"]["trace_id"]
    )
    assert error["contexts"]["sqs_job"]["job_type"] == JOB_TYPE
    assert error["tags"]["job_type"] == JOB_TYPE
    assert job["contexts"]["trace"]["status"] == "internal_error"


@pytest.mark.parametrize(
    ("report_non_retryable", "reported"), [(False, False), (True, True)]
)
def test_non_retryable_errors_are_reported_only_when_asked(
    sentry: RecordingTransport,
    make_job_app: MakeJobApp,
    report_non_retryable: bool,
    reported: bool,
) -> None:
    job_app = make_job_app(SentryMiddleware(report_non_retryable=report_non_retryable))
    job_app.failure = NonRetryableError("no such user")

    job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.DELETE]
    assert len(sentry.errors()) == (1 if reported else 0)


def test_retry_job_is_never_reported(
    sentry: RecordingTransport, make_job_app: MakeJobApp
) -> None:
    job_app = make_job_app(SentryMiddleware(report_non_retryable=True))
    job_app.failure = RetryJob(delay_seconds=60)

    job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.RETRY]
    assert sentry.errors() == []
    job = only(sentry.transactions("queue.process"))
    assert job["contexts"]["trace"]["status"] == "cancelled"


def test_each_job_gets_a_fresh_isolation_scope(
    sentry: RecordingTransport, make_job_app: MakeJobApp
) -> None:
    job_app = make_job_app(SentryMiddleware())
    job_app.failure = ValueError("boom")
    sentry_sdk.add_breadcrumb(message="from the worker process")

    job_app.signup()
    job_app.work_off()

    crumbs = only(sentry.errors()).get("breadcrumbs", {}).get("values", [])
    assert "from the worker process" not in [c.get("message") for c in crumbs]


def _broken(*args: object, **kwargs: object) -> t.NoReturn:
    raise RuntimeError("the SDK broke")


@pytest.mark.parametrize(
    ("phase", "target", "failure", "outcome"),
    [
        # Before the handler runs.
        ("consume", (sentry_sdk, "continue_trace"), None, Outcome.SUCCESS),
        ("consume", (sentry_sdk, "isolation_scope"), None, Outcome.SUCCESS),
        # While the handler's exception is reported.
        ("consume", (sentry_sdk, "capture_event"), ValueError("boom"), Outcome.RETRY),
        # After the handler returned or raised.
        ("consume", (Transaction, "set_status"), None, Outcome.SUCCESS),
        ("consume", (Transaction, "set_status"), ValueError("boom"), Outcome.RETRY),
        ("consume", (Transaction, "__exit__"), None, Outcome.SUCCESS),
        ("consume", (Transaction, "__exit__"), ValueError("boom"), Outcome.RETRY),
        # Around the send.
        ("produce", (sentry_sdk, "get_traceparent"), None, Outcome.SUCCESS),
        ("produce", (sentry_sdk, "start_span"), None, Outcome.SUCCESS),
    ],
)
def test_a_failing_sdk_never_changes_the_outcome_nor_reruns_the_handler(
    sentry: RecordingTransport,
    make_job_app: MakeJobApp,
    logs: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
    target: tuple[object, str],
    failure: Exception | None,
    outcome: Outcome,
) -> None:
    job_app = make_job_app(SentryMiddleware())
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
        ("sentry", phase)
    ]
