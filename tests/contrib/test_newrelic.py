"""NewRelicMiddleware, observed through the agent API functions it calls.

The New Relic agent has no in-memory recorder or test transport: its data only
leaves the process for New Relic's collector. These tests therefore replace the
``newrelic.agent`` API functions the middleware calls with a :class:`FakeAgent`
that records the calls and behaves like a running agent (transactions, trace
and span ids, distributed-trace headers). One test runs the real agent,
uninitialised, to check the fallback when it is not running.
"""

from __future__ import annotations

import dataclasses
import secrets
import typing as t

import newrelic.agent
import pytest
import structlog
from flask_sqs_jobs import Job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs.contrib.newrelic import NewRelicMiddleware
from flask_sqs_jobs.engine.model._outcome import Outcome
from flask_sqs_jobs.testing import record_enqueued

from tests.contrib.helpers import JOB_TYPE
from tests.contrib.helpers import only_event

if t.TYPE_CHECKING:
    from structlog.typing import EventDict

    from tests.contrib.helpers import MakeJobApp


@dataclasses.dataclass
class FakeTransaction:
    """A transaction (or function trace) of the :class:`FakeAgent`."""

    agent: FakeAgent
    name: str
    group: str | None = None
    application: object = None
    kind: str = "background"
    trace_id: str = dataclasses.field(default_factory=lambda: secrets.token_hex(16))
    span_id: str = dataclasses.field(default_factory=lambda: secrets.token_hex(8))
    attributes: dict[str, object] = dataclasses.field(default_factory=dict)
    parent: FakeTransaction | None = None

    def __enter__(self) -> FakeTransaction:
        self.parent = self.agent.current
        self.agent.current = self
        self.agent.entered.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.agent.current = self.parent


class FakeAgent:
    """Stands in for the ``newrelic.agent`` functions the middleware calls."""

    def __init__(self) -> None:
        self.current: FakeTransaction | None = None
        self.entered: list[FakeTransaction] = []
        self.accepted: list[tuple[dict[str, str], str]] = []
        self.noticed: list[BaseException] = []
        self.applications: list[str | None] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "accept_distributed_trace_headers",
            "add_custom_attributes",
            "application",
            "BackgroundTask",
            "current_transaction",
            "FunctionTrace",
            "get_linking_metadata",
            "insert_distributed_trace_headers",
            "notice_error",
        ):
            monkeypatch.setattr(newrelic.agent, name, getattr(self, name))

    def web_transaction(self) -> FakeTransaction:
        return FakeTransaction(self, "signup", "Uri", kind="web")

    # -- the agent API --

    def application(self, name: str | None = None) -> object:
        self.applications.append(name)
        return f"application {name}"

    def BackgroundTask(
        self, application: object, name: str, group: str | None = None
    ) -> FakeTransaction:
        return FakeTransaction(self, name, group, application)

    def FunctionTrace(self, name: str, group: str | None = None) -> FakeTransaction:
        return FakeTransaction(self, name, group, kind="function")

    def current_transaction(self) -> FakeTransaction | None:
        return self.current

    def insert_distributed_trace_headers(self, headers: list[tuple[str, str]]) -> None:
        if self.current is not None:
            current = self.current
            headers.extend(
                [
                    ("newrelic", "eyJ2IjpbMCwxXX0="),
                    ("traceparent", f"00-{current.trace_id}-{current.span_id}-01"),
                    ("tracestate", "1@nr=0-0-1-2-3-4-1-1.0-1"),
                ]
            )

    def accept_distributed_trace_headers(
        self, headers: dict[str, str], transport_type: str = "HTTP"
    ) -> bool:
        self.accepted.append((dict(headers), transport_type))
        if self.current is not None and "traceparent" in headers:
            self.current.trace_id = headers["traceparent"].split("-")[1]
        return True

    def add_custom_attributes(self, items: list[tuple[str, object]]) -> None:
        assert self.current is not None
        self.current.attributes.update(items)

    def get_linking_metadata(self) -> dict[str, str]:
        metadata = {"entity.type": "SERVICE", "entity.name": "tests"}
        if self.current is not None:
            metadata["trace.id"] = self.current.trace_id
            metadata["span.id"] = self.current.span_id
        return metadata

    def notice_error(self, error: tuple[type, BaseException, object]) -> None:
        self.noticed.append(error[1])


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> FakeAgent:
    agent = FakeAgent()
    agent.install(monkeypatch)
    return agent


def test_each_job_is_a_background_task_that_continues_the_producer_trace(
    agent: FakeAgent, make_job_app: MakeJobApp, logs: list[EventDict]
) -> None:
    job_app = make_job_app(NewRelicMiddleware(application="billing-worker"))
    job_app.around_enqueue = agent.web_transaction

    with record_enqueued(job_app.app) as enqueued:
        message_id = job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.SUCCESS]
    web, task = agent.entered
    headers = enqueued[0].trace_headers
    assert set(headers) == {"newrelic", "traceparent", "tracestate"}
    assert agent.accepted == [(headers, "Queue")]
    assert (task.kind, task.name, task.group) == ("background", JOB_TYPE, "SQSJob")
    assert task.application == "application billing-worker"
    assert task.trace_id == web.trace_id
    assert task.attributes == {
        "sqs_jobs.queue": "default",
        "sqs_jobs.message_id": message_id,
        "sqs_jobs.receive_count": 1,
    }

    sent = only_event(logs, "job_enqueued")
    assert (sent["trace_id"], sent["span_id"]) == (web.trace_id, web.span_id)
    for name in ("job_started", "job_finished"):
        event = only_event(logs, name)
        assert (event["trace_id"], event["span_id"]) == (task.trace_id, task.span_id)


@pytest.mark.parametrize(
    ("failure", "report_non_retryable", "noticed"),
    [
        (ValueError("mail server down"), False, True),
        (NonRetryableError("no such user"), False, False),
        (NonRetryableError("no such user"), True, True),
        (RetryJob(delay_seconds=60), True, False),
    ],
)
def test_handler_errors_are_noticed_unless_refused_on_purpose(
    agent: FakeAgent,
    make_job_app: MakeJobApp,
    failure: Exception,
    report_non_retryable: bool,
    noticed: bool,
) -> None:
    job_app = make_job_app(
        NewRelicMiddleware(report_non_retryable=report_non_retryable)
    )
    job_app.failure = failure

    job_app.signup()
    finished = job_app.work_off()

    assert [f.exception for f in finished] == [failure]
    assert agent.noticed == ([failure] if noticed else [])


def test_inside_a_running_transaction_a_job_is_a_function_trace(
    agent: FakeAgent,
) -> None:
    job = Job(JOB_TYPE, {}, "default", message_id="m-1", receive_count=1)
    ran: list[Job] = []

    with agent.web_transaction() as web:
        NewRelicMiddleware().consume(job, ran.append)

    assert ran == [job]
    assert [(e.kind, e.name) for e in agent.entered] == [
        ("web", "signup"),
        ("function", JOB_TYPE),
    ]
    assert agent.accepted == []
    assert agent.current is None
    assert web.parent is None


def test_without_a_running_agent_a_made_up_traceparent_links_the_logs(
    make_job_app: MakeJobApp, logs: list[EventDict]
) -> None:
    """The real agent, never initialised: it adds no headers and runs no task."""
    job_app = make_job_app(NewRelicMiddleware())

    with record_enqueued(job_app.app) as enqueued:
        job_app.signup()
    finished = job_app.work_off()

    assert [f.outcome for f in finished] == [Outcome.SUCCESS]
    headers = enqueued[0].trace_headers
    assert list(headers) == ["traceparent"]
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, flags) == ("00", "00")
    sent = only_event(logs, "job_enqueued")
    assert (sent["trace_id"], sent["span_id"]) == (trace_id, span_id)
    started = only_event(logs, "job_started")
    assert started["trace_id"] == trace_id
    assert len(started["span_id"]) == 16
    assert started["span_id"] != span_id


def test_the_made_up_traceparent_keeps_a_trace_id_the_app_bound(
    make_job_app: MakeJobApp,
) -> None:
    job_app = make_job_app(NewRelicMiddleware())
    trace_id = "0af7651916cd43dd8448eb211c80319c"

    with (
        record_enqueued(job_app.app) as enqueued,
        job_app.app.app_context(),
        structlog.contextvars.bound_contextvars(trace_id=trace_id),
    ):
        job_app.jobs.enqueue("default", JOB_TYPE, {})

    assert enqueued[0].trace_headers["traceparent"].split("-")[1] == trace_id


def _broken(*args: object, **kwargs: object) -> t.NoReturn:
    raise RuntimeError("the agent broke")


@pytest.mark.parametrize(
    ("phase", "name", "failure", "outcome"),
    [
        # Before the handler runs.
        ("consume", "BackgroundTask", None, Outcome.SUCCESS),
        ("consume", "accept_distributed_trace_headers", None, Outcome.SUCCESS),
        # While the handler's exception is noticed.
        ("consume", "notice_error", ValueError("boom"), Outcome.RETRY),
        # Leaving the background task, after the handler returned or raised.
        ("consume", "__exit__", None, Outcome.SUCCESS),
        ("consume", "__exit__", ValueError("boom"), Outcome.RETRY),
        # Around the send.
        ("produce", "insert_distributed_trace_headers", None, Outcome.SUCCESS),
    ],
)
def test_a_failing_agent_never_changes_the_outcome_nor_reruns_the_handler(
    agent: FakeAgent,
    make_job_app: MakeJobApp,
    logs: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
    name: str,
    failure: Exception | None,
    outcome: Outcome,
) -> None:
    job_app = make_job_app(NewRelicMiddleware())
    job_app.failure = failure
    target: object = FakeTransaction if name == "__exit__" else newrelic.agent

    with monkeypatch.context() as patch:
        if phase == "produce":
            patch.setattr(target, name, _broken)
        job_app.signup()
    with monkeypatch.context() as patch:
        if phase == "consume":
            patch.setattr(target, name, _broken)
        finished = job_app.work_off()

    assert [f.outcome for f in finished] == [outcome]
    assert finished[0].exception is failure
    assert len(job_app.calls) == 1
    failed = [e for e in logs if e["event"] == "integration_failed"]
    assert [(e["integration"], e["step"].split("_")[0]) for e in failed] == [
        ("newrelic", phase)
    ]
