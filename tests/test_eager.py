"""SQS_JOBS_EAGER: enqueue runs the handler inline, through the real processing path."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import re
import typing as t

import pytest
from flask import Flask
from flask import g
from flask import has_request_context
from flask_sqs_jobs import current_job
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine import UnknownQueueError
from flask_sqs_jobs.testing import record_finished

from tests.conftest import MakeApp
from tests.support import message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def app_config(app_config: dict[str, t.Any]) -> dict[str, t.Any]:
    return {**app_config, "SQS_JOBS_EAGER": True}


@pytest.fixture
def ran(jobs: SQSJobs) -> list[Payload]:
    """The payloads the ``record`` handler received; ``fail`` always raises."""
    payloads: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        payloads.append(payload)

    @jobs.handler("fail")
    def fail(payload: Payload) -> None:
        raise ConnectionError(payload.get("why", "mail server busy"))

    return payloads


def test_enqueue_runs_the_handler_before_returning_a_message_id(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    message_id = jobs.enqueue("default", "record", {"n": 1})

    assert ran == [{"n": 1}]
    assert UUID.fullmatch(message_id)


def test_nothing_reaches_sqs(
    app: Flask,
    jobs: SQSJobs,
    ran: list[Payload],
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    jobs.enqueue("default", "record", {"n": 1})
    with pytest.raises(ConnectionError):
        jobs.enqueue("critical", "fail")

    assert message_count(sqs, queue_urls["default"]) == 0
    assert message_count(sqs, queue_urls["critical"]) == 0


def test_eager_mode_needs_no_queue_to_exist_in_sqs(
    make_app: MakeApp, jobs: SQSJobs, ran: list[Payload]
) -> None:
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"default": {"name": "never-created"}},
            "SQS_JOBS_EAGER": True,
        }
    )

    with app.app_context():
        jobs.enqueue("default", "record", {"n": 1})

    assert ran == [{"n": 1}]


def test_the_payload_makes_a_json_round_trip(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    """The handler gets what a worker would get: a tuple arrives as a list,
    and the caller's dict is not the handler's."""
    payload: Payload = {"pair": (1, 2), "nested": {"ok": True}}

    jobs.enqueue("default", "record", payload)

    assert ran == [{"pair": [1, 2], "nested": {"ok": True}}]
    assert ran[0] is not payload
    assert ran[0]["nested"] is not payload["nested"]


def test_the_handler_sees_the_job_as_a_worker_would(app: Flask, jobs: SQSJobs) -> None:
    seen: list[tuple[str, str | None, int | None, Payload]] = []

    @jobs.handler("inspect")
    def inspect(payload: Payload) -> None:
        seen.append(
            (
                current_job.queue,
                current_job.message_id,
                current_job.receive_count,
                current_job.correlation_fields,
            )
        )

    message_id = jobs.enqueue(
        "critical", "inspect", correlation_fields={"request_id": "r-1", "user": 7}
    )

    assert seen == [("critical", message_id, 1, {"request_id": "r-1", "user": 7})]


def test_the_handlers_exception_propagates_to_the_caller(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    with (
        record_finished(app) as finished,
        pytest.raises(ConnectionError, match="mail server busy"),
    ):
        jobs.enqueue("default", "fail")

    assert [(f.outcome, type(f.exception)) for f in finished] == [
        ("retry", ConnectionError)
    ]


def test_a_non_retryable_error_propagates_too(app: Flask, jobs: SQSJobs) -> None:
    @jobs.handler("charge")
    def charge(payload: Payload) -> None:
        raise NonRetryableError("card declined")

    with record_finished(app) as finished, pytest.raises(NonRetryableError):
        jobs.enqueue("default", "charge")

    assert [f.outcome for f in finished] == ["delete"]


def test_the_exception_reaches_a_test_client_through_the_view(
    app: Flask, client: FlaskClient, jobs: SQSJobs, ran: list[Payload]
) -> None:
    @app.post("/signup")
    def signup() -> str:
        return jobs.enqueue("default", "fail", {"why": "smtp down"})

    with pytest.raises(ConnectionError, match="smtp down"):
        client.post("/signup")


def test_an_unknown_job_type_raises_lookup_error(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    expected = (
        "SQS_JOBS_EAGER: no handler is registered for job type 'welcome'; register"
        " one with @jobs.handler('welcome')"
    )
    with pytest.raises(LookupError, match=re.escape(expected)):
        jobs.enqueue("default", "welcome")


@pytest.mark.parametrize(
    ("queue", "job_type", "payload", "options", "error", "message"),
    [
        ("default", "record", {"at": dt.date(2024, 1, 1)}, {}, TypeError, "payload"),
        ("default", "record", ["not", "a", "dict"], {}, TypeError, "payload"),
        ("default", "", {}, {}, ValueError, "job_type"),
        ("default", "record", {}, {"delay_seconds": -1}, ValueError, "delay_seconds"),
        ("reports", "record", {}, {}, UnknownQueueError, "unknown queue 'reports'"),
    ],
    ids=["payload-not-json", "payload-not-dict", "empty-job-type", "delay", "queue"],
)
def test_invalid_jobs_are_refused_as_they_would_be_without_eager_mode(
    app: Flask,
    jobs: SQSJobs,
    ran: list[Payload],
    queue: str,
    job_type: str,
    payload: t.Any,
    options: dict[str, t.Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        jobs.enqueue(queue, job_type, payload, **options)

    assert ran == []


def test_a_fifo_queue_still_requires_a_message_group_id(
    make_app: MakeApp, jobs: SQSJobs, ran: list[Payload]
) -> None:
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"orders": {"name": "orders.fifo"}},
            "SQS_JOBS_EAGER": True,
        }
    )

    with app.app_context():
        with pytest.raises(ValueError, match="message_group_id"):
            jobs.enqueue("orders", "record", {"n": 1})
        jobs.enqueue("orders", "record", {"n": 2}, message_group_id="customer-1")

    assert ran == [{"n": 2}]


def test_delays_are_ignored_the_job_runs_now(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    jobs.enqueue("default", "record", {"n": 1}, delay_seconds=600)
    jobs.enqueue("default", "record", {"n": 2}, delay_seconds=3600)
    jobs.enqueue(
        "default",
        "record",
        {"n": 3},
        run_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=2),
    )

    assert ran == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_async_handlers_run_to_completion(app: Flask, jobs: SQSJobs) -> None:
    done: list[Payload] = []

    @jobs.handler("async_job")
    async def async_job(payload: Payload) -> None:
        done.append(payload)

    jobs.enqueue("default", "async_job", {"n": 1})

    assert done == [{"n": 1}]


class Recording(JobMiddleware):
    """Middleware that notes each step it wraps."""

    def __init__(self, name: str, steps: list[str]) -> None:
        self.name = name
        self.steps = steps

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        self.steps.append(f"{self.name}.produce {job.payload}")
        job.correlation_fields[f"{self.name}_was_here"] = True
        return call_next(job)

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        self.steps.append(f"{self.name}.consume {job.payload}")
        call_next(job)
        self.steps.append(f"{self.name}.consumed")


def test_middleware_wraps_producing_and_consuming_in_order(
    make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    steps: list[str] = []
    jobs = SQSJobs(middleware=[Recording("outer", steps), Recording("inner", steps)])
    fields: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        steps.append("handler")
        fields.append(current_job.correlation_fields)

    app = make_app(extension=jobs)
    with app.app_context():
        jobs.enqueue("default", "record", {"pair": (1, 2)})

    assert steps == [
        "outer.produce {'pair': (1, 2)}",
        "inner.produce {'pair': (1, 2)}",
        "outer.consume {'pair': [1, 2]}",
        "inner.consume {'pair': [1, 2]}",
        "handler",
        "inner.consumed",
        "outer.consumed",
    ]
    assert fields == [{"outer_was_here": True, "inner_was_here": True}]


def test_each_eager_job_gets_a_fresh_app_context_torn_down_after_it(
    app: Flask, jobs: SQSJobs
) -> None:
    teardowns: list[object] = []
    seen: list[object] = []

    @app.teardown_appcontext
    def count(exc: BaseException | None) -> None:
        teardowns.append(g.get("job"))

    @jobs.handler("mark")
    def mark(payload: Payload) -> None:
        seen.append(g.get("job"))
        g.job = payload["n"]

    g.job = "the test's"
    jobs.enqueue("default", "mark", {"n": 1})
    jobs.enqueue("default", "mark", {"n": 2})

    assert seen == [None, None]
    assert teardowns == [1, 2]
    assert g.job == "the test's"


def test_an_eager_job_runs_outside_the_request_that_enqueued_it(
    app: Flask, client: FlaskClient, jobs: SQSJobs
) -> None:
    """As in a worker, a handler cannot lean on the web request."""
    in_request: list[bool] = []

    @jobs.handler("check")
    def check(payload: Payload) -> None:
        in_request.append(has_request_context())

    @app.post("/check")
    def view() -> str:
        return jobs.enqueue("default", "check")

    client.post("/check")

    assert in_request == [False]


def test_the_request_id_of_the_view_travels_with_the_eager_job(
    app: Flask, client: FlaskClient, jobs: SQSJobs
) -> None:
    fields: list[Payload] = []

    @jobs.handler("check")
    def check(payload: Payload) -> None:
        fields.append(current_job.correlation_fields)

    @app.post("/check")
    def view() -> str:
        return jobs.enqueue("default", "check")

    client.post("/check", headers={"X-Request-ID": "req-9"})

    assert fields == [{"request_id": "req-9"}]


def test_the_signals_are_sent_in_order_with_the_app_as_sender(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    calls: list[tuple[str, object, str]] = []

    def recorder(name: str) -> cabc.Callable[..., None]:
        def record(sender: object, **kwargs: t.Any) -> None:
            calls.append((name, sender, kwargs["message_id"]))

        return record

    with (
        signals.job_enqueued.connected_to(recorder("enqueued"), sender=app),
        signals.job_started.connected_to(recorder("started"), sender=app),
        signals.job_finished.connected_to(recorder("finished"), sender=app),
    ):
        message_id = jobs.enqueue("default", "record")

    assert calls == [
        ("enqueued", app, message_id),
        ("started", app, message_id),
        ("finished", app, message_id),
    ]


def test_the_job_is_logged_like_a_worker_job(
    app: Flask, jobs: SQSJobs, ran: list[Payload], log_events: list[EventDict]
) -> None:
    message_id = jobs.enqueue("default", "record")

    events = {e["event"]: e for e in log_events}
    assert events["job_enqueued"]["eager"] is True
    assert events["job_enqueued"]["message_id"] == message_id
    assert events["job_started"]["message_id"] == message_id
    assert events["job_finished"]["outcome"] == "success"
    assert events["job_finished"]["job_type"] == "record"


def test_a_job_enqueued_by_an_eager_job_runs_too(app: Flask, jobs: SQSJobs) -> None:
    order: list[str] = []

    @jobs.handler("parent")
    def parent(payload: Payload) -> None:
        order.append("parent")
        jobs.enqueue("default", "child")
        order.append("parent done")

    @jobs.handler("child")
    def child(payload: Payload) -> None:
        order.append("child")

    jobs.enqueue("default", "parent")

    assert order == ["parent", "child", "parent done"]


def test_eager_jobs_carry_their_job_id(app: Flask, jobs: SQSJobs) -> None:
    seen: list[str | None] = []
    enqueued: list[str | None] = []

    @jobs.handler("inspect")
    def inspect(payload: Payload) -> None:
        seen.append(current_job.job_id)

    def on_enqueued(sender: object, job: Job, **kwargs: t.Any) -> None:
        enqueued.append(job.job_id)

    with signals.job_enqueued.connected_to(on_enqueued):
        jobs.enqueue("critical", "inspect", job_id="eager-1")
        jobs.enqueue("critical", "inspect")
        jobs.enqueue_many(
            "critical", [{"job_type": "inspect", "job_id": "eager-2"}, ("inspect", {})]
        )

    assert seen == enqueued
    assert seen[0] == "eager-1"
    assert seen[2] == "eager-2"
    for random_id in (seen[1], seen[3]):
        assert isinstance(random_id, str)
        assert re.fullmatch(r"[0-9a-f]{32}", random_id)


@pytest.mark.parametrize("job_id", ["", "a b", 7])
def test_eager_mode_refuses_an_invalid_job_id_before_running_anything(
    app: Flask, jobs: SQSJobs, ran: list[Payload], job_id: object
) -> None:
    with pytest.raises((TypeError, ValueError), match="job_id"):
        jobs.enqueue("critical", "record", job_id=t.cast(t.Any, job_id))

    assert ran == []
