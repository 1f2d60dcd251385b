"""Blinker signals: sent with the app as sender; receivers watch, never steer."""

from __future__ import annotations

import typing as t

import pytest
from blinker import NamedSignal
from flask import current_app
from flask import Flask
from flask import g
from flask_sqs_jobs import Job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.flask_helpers import sent_jobs
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


class Recorder:
    """A receiver that keeps the sender and keyword arguments of each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, dict[str, t.Any]]] = []

    def __call__(self, sender: object, **kwargs: t.Any) -> None:
        self.calls.append((sender, kwargs))

    @property
    def kwargs(self) -> list[dict[str, t.Any]]:
        return [kwargs for _, kwargs in self.calls]


class Raiser:
    """A receiver that records its call, then raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def __call__(self, sender: object, **kwargs: t.Any) -> None:
        self.calls += 1
        raise RuntimeError(f"{self.name} is broken")


def failed_signals(log_events: list[EventDict]) -> list[str]:
    """The signal named by each ``signal_receiver_failed`` log event."""
    return [e["signal"] for e in log_events if e["event"] == "signal_receiver_failed"]


def the_app() -> Flask:
    """The current app itself, not the proxy."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    return app


@pytest.fixture
def handlers(jobs: SQSJobs) -> dict[str, list[Payload]]:
    """Handlers ``ok``, ``boom`` and ``drop``; what ``ok`` ran, by job type."""
    ran: dict[str, list[Payload]] = {"ok": []}

    @jobs.handler("ok")
    def ok(payload: Payload) -> None:
        ran["ok"].append(payload)

    @jobs.handler("boom")
    def boom(payload: Payload) -> None:
        raise ValueError("boom")

    @jobs.handler("drop")
    def drop(payload: Payload) -> None:
        raise NonRetryableError("no use retrying")

    return ran


def test_job_enqueued_is_sent_with_the_job_queue_and_message_id(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    recorder = Recorder()

    with (
        signals.job_enqueued.connected_to(recorder, sender=bare_app),
        bare_app.app_context(),
    ):
        message_id = jobs.enqueue("critical", "ok", {"n": 1})

    [(sender, kwargs)] = recorder.calls
    assert sender is bare_app
    assert set(kwargs) == {"job", "queue", "message_id"}
    assert (kwargs["queue"], kwargs["message_id"]) == ("critical", message_id)
    job: Job = kwargs["job"]
    assert (job.job_type, job.payload, job.queue) == ("ok", {"n": 1}, "critical")


def test_job_started_is_sent_with_the_job_queue_message_id_and_receive_count(
    bare_app: Flask, jobs: SQSJobs, handlers: dict[str, list[Payload]]
) -> None:
    recorder = Recorder()
    with bare_app.app_context():
        message_id = jobs.enqueue("default", "ok", {"n": 1})

    with signals.job_started.connected_to(recorder, sender=bare_app):
        work_off(bare_app)

    [(sender, kwargs)] = recorder.calls
    assert sender is bare_app
    assert set(kwargs) == {"job", "queue", "message_id", "receive_count"}
    assert kwargs["queue"] == "default"
    assert kwargs["message_id"] == message_id
    assert kwargs["receive_count"] == 1
    job: Job = kwargs["job"]
    assert (job.job_type, job.payload, job.message_id) == ("ok", {"n": 1}, message_id)


@pytest.mark.parametrize(
    ("job_type", "outcome", "exception"),
    [
        ("ok", "success", None),
        ("boom", "retry", ValueError),
        ("drop", "delete", NonRetryableError),
    ],
)
def test_job_finished_is_sent_with_the_outcome_duration_and_exception(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: dict[str, list[Payload]],
    job_type: str,
    outcome: str,
    exception: type[Exception] | None,
) -> None:
    recorder = Recorder()
    with bare_app.app_context():
        message_id = jobs.enqueue("default", job_type)

    with signals.job_finished.connected_to(recorder, sender=bare_app):
        work_off(bare_app)

    [(sender, kwargs)] = recorder.calls
    assert sender is bare_app
    assert set(kwargs) == {
        "job",
        "queue",
        "message_id",
        "outcome",
        "duration_ms",
        "exception",
        "result",
        "will_retry",
    }
    assert kwargs["job"].job_type == job_type
    assert (kwargs["queue"], kwargs["message_id"]) == ("default", message_id)
    assert kwargs["outcome"] == outcome
    assert isinstance(kwargs["duration_ms"], float | int)
    assert kwargs["duration_ms"] >= 0
    if exception is None:
        assert kwargs["exception"] is None
    else:
        assert type(kwargs["exception"]) is exception
    # The handlers return None; only a retry leaves the message for another try.
    assert kwargs["result"] is None
    assert kwargs["will_retry"] is (outcome == "retry")


def test_worker_started_and_stopped_are_sent_with_the_queues_and_the_reason(
    bare_app: Flask, jobs: SQSJobs, handlers: dict[str, list[Payload]]
) -> None:
    started, stopped = Recorder(), Recorder()

    with (
        signals.worker_started.connected_to(started, sender=bare_app),
        signals.worker_stopped.connected_to(stopped, sender=bare_app),
    ):
        work_off(bare_app, queues=["critical"])

    assert started.calls == [(bare_app, {"queues": ["critical"]})]
    assert stopped.calls == [(bare_app, {"reason": "should_stop"})]


def test_receivers_connected_for_another_app_hear_nothing(
    bare_app: Flask, make_app: MakeApp, jobs: SQSJobs
) -> None:
    other_app = make_app(extension=SQSJobs())
    recorder = Recorder()

    with (
        signals.job_enqueued.connected_to(recorder, sender=other_app),
        bare_app.app_context(),
    ):
        jobs.enqueue("default", "ok")

    assert recorder.calls == []


def test_a_raising_job_finished_receiver_is_logged_and_changes_no_outcome(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: dict[str, list[Payload]],
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
) -> None:
    """Two receivers raise, so whichever blinker calls first, a receiver is
    called after a failing one."""
    first, second, recorder = Raiser("first"), Raiser("second"), Recorder()
    with bare_app.app_context():
        jobs.enqueue("default", "ok", {"n": 1})

    with (
        signals.job_finished.connected_to(first, sender=bare_app),
        signals.job_finished.connected_to(second, sender=bare_app),
        signals.job_finished.connected_to(recorder, sender=bare_app),
    ):
        finished = work_off(bare_app)

    assert [f.outcome for f in finished] == ["success"]
    assert message_count(sqs, queue_urls["default"]) == 0
    assert (first.calls, second.calls) == (1, 1)
    assert [kwargs["outcome"] for kwargs in recorder.kwargs] == ["success"]
    assert failed_signals(log_events) == ["job-finished", "job-finished"]
    failures = [e for e in log_events if e["event"] == "signal_receiver_failed"]
    assert all(e["log_level"] == "error" and e["exc_info"] for e in failures)


def test_a_raising_job_started_receiver_does_not_stop_the_job(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: dict[str, list[Payload]],
    log_events: list[EventDict],
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "ok", {"n": 1})

    with signals.job_started.connected_to(Raiser("started"), sender=bare_app):
        finished = work_off(bare_app)

    assert [f.outcome for f in finished] == ["success"]
    assert handlers["ok"] == [{"n": 1}]
    assert [
        e["signal"] for e in log_events if e["event"] == "signal_receiver_failed"
    ] == ["job-started"]


def test_a_raising_job_enqueued_receiver_does_not_stop_the_send(
    bare_app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
) -> None:
    with (
        signals.job_enqueued.connected_to(Raiser("enqueued"), sender=bare_app),
        bare_app.app_context(),
    ):
        message_id = jobs.enqueue("default", "ok", {"n": 1})

    assert [job.message_id for job in sent_jobs(sqs, queue_urls["default"])] == [
        message_id
    ]
    assert [
        e["signal"] for e in log_events if e["event"] == "signal_receiver_failed"
    ] == ["job-enqueued"]


@pytest.mark.parametrize(
    "signal", [signals.worker_started, signals.worker_stopped], ids=lambda s: s.name
)
def test_a_raising_worker_receiver_does_not_stop_the_worker(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: dict[str, list[Payload]],
    log_events: list[EventDict],
    signal: NamedSignal,
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "ok", {"n": 1})

    with signal.connected_to(Raiser(signal.name), sender=bare_app):
        finished = work_off(bare_app)

    assert [f.outcome for f in finished] == ["success"]
    assert [
        e["signal"] for e in log_events if e["event"] == "signal_receiver_failed"
    ] == [signal.name]


def test_receivers_can_use_the_app_context_of_the_job(
    bare_app: Flask, jobs: SQSJobs, handlers: dict[str, list[Payload]]
) -> None:
    """``job_started`` and ``job_finished`` run inside the job's app context."""
    seen: list[tuple[str, Flask, object]] = []

    def started(sender: Flask, **extra: t.Any) -> None:
        g.started_by = extra["message_id"]
        seen.append(("started", the_app(), None))

    def finished(sender: Flask, **extra: t.Any) -> None:
        seen.append(("finished", the_app(), g.get("started_by")))

    with bare_app.app_context():
        message_id = jobs.enqueue("default", "ok")
    with (
        signals.job_started.connected_to(started, sender=bare_app),
        signals.job_finished.connected_to(finished, sender=bare_app),
    ):
        work_off(bare_app)

    assert seen == [("started", bare_app, None), ("finished", bare_app, message_id)]


def test_every_signals_job_carries_the_job_id_enqueue_set(
    bare_app: Flask, jobs: SQSJobs, handlers: dict[str, list[Payload]]
) -> None:
    recorders = {
        name: Recorder() for name in ("job_enqueued", "job_started", "job_finished")
    }
    with (
        bare_app.app_context(),
        signals.job_enqueued.connected_to(recorders["job_enqueued"], sender=bare_app),
    ):
        jobs.enqueue("default", "ok", {"n": 1})
        jobs.enqueue("default", "ok", {"n": 2}, job_id="order-2")

    with (
        signals.job_started.connected_to(recorders["job_started"], sender=bare_app),
        signals.job_finished.connected_to(recorders["job_finished"], sender=bare_app),
    ):
        work_off(bare_app)

    def job_ids(name: str) -> dict[int, str | None]:
        return {
            kwargs["job"].payload["n"]: kwargs["job"].job_id
            for kwargs in recorders[name].kwargs
        }

    enqueued = job_ids("job_enqueued")
    assert enqueued[2] == "order-2"
    assert isinstance(enqueued[1], str)
    assert len(enqueued[1]) == 32
    assert job_ids("job_started") == enqueued
    assert job_ids("job_finished") == enqueued
