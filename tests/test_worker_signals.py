"""The signals operators hook into: ``job_received``, ``worker_error``, and
``job_finished``'s ``result`` and ``will_retry``."""

from __future__ import annotations

import typing as t

import pytest
from flask import current_app
from flask import Flask
from flask_sqs_jobs import Job
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.engine.helpers import poll_until
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


def raising(sender: object, **kwargs: t.Any) -> None:
    raise RuntimeError("receiver is broken")


@pytest.fixture
def handlers(jobs: SQSJobs) -> None:
    @jobs.handler("double")
    def double(payload: Payload) -> dict[str, int]:
        return {"twice": payload["n"] * 2}

    @jobs.handler("boom")
    def boom(payload: Payload) -> None:
        raise ValueError("boom")


def test_job_received_is_sent_in_the_jobs_app_context_before_it_starts(
    bare_app: Flask, jobs: SQSJobs, handlers: None
) -> None:
    order: list[tuple[str, bool]] = []

    def received(sender: Flask, **kwargs: t.Any) -> None:
        order.append(("received", current_app._get_current_object() is sender))  # type: ignore[attr-defined]

    def started(sender: Flask, **kwargs: t.Any) -> None:
        order.append(("started", True))

    recorder = Recorder()
    with bare_app.app_context():
        message_id = jobs.enqueue("critical", "double", {"n": 2})
    with (
        signals.job_received.connected_to(recorder, sender=bare_app),
        signals.job_received.connected_to(received, sender=bare_app),
        signals.job_started.connected_to(started, sender=bare_app),
    ):
        work_off(bare_app)

    [(sender, kwargs)] = recorder.calls
    assert sender is bare_app
    assert set(kwargs) == {"job", "queue", "message_id", "receive_count"}
    assert (kwargs["queue"], kwargs["message_id"], kwargs["receive_count"]) == (
        "critical",
        message_id,
        1,
    )
    job: Job = kwargs["job"]
    assert (job.job_type, job.payload) == ("double", {"n": 2})
    assert order == [("received", True), ("started", True)]


def test_job_finished_carries_the_handlers_result_and_whether_it_comes_back(
    bare_app: Flask, jobs: SQSJobs, handlers: None
) -> None:
    recorder = Recorder()
    with bare_app.app_context():
        jobs.enqueue("default", "double", {"n": 21})
        jobs.enqueue("default", "boom", {"n": 0})
    with signals.job_finished.connected_to(recorder, sender=bare_app):
        work_off(bare_app, max_jobs=2)

    by_type = {k["job"].job_type: k for k in recorder.kwargs}
    assert (by_type["double"]["result"], by_type["double"]["will_retry"]) == (
        {"twice": 42},
        False,
    )
    assert (by_type["boom"]["result"], by_type["boom"]["will_retry"]) == (None, True)


def test_work_off_reports_the_result_and_will_retry_too(
    bare_app: Flask, jobs: SQSJobs, handlers: None
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "double", {"n": 4})
    [finished] = work_off(bare_app)
    assert (finished.outcome, finished.result, finished.will_retry) == (
        "success",
        {"twice": 8},
        False,
    )


def test_a_raising_receiver_is_a_hook_error_and_changes_nothing(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: None,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
) -> None:
    errors = Recorder()
    with bare_app.app_context():
        jobs.enqueue("default", "double", {"n": 1})
    with (
        signals.job_received.connected_to(raising, sender=bare_app),
        signals.worker_error.connected_to(errors, sender=bare_app),
    ):
        [finished] = work_off(bare_app)

    assert finished.outcome == "success"
    assert message_count(sqs, queue_urls["default"]) == 0
    [(sender, kwargs)] = errors.calls
    assert sender is bare_app
    assert set(kwargs) == {"queue", "exception", "kind"}
    assert (kwargs["queue"], kwargs["kind"]) == ("default", "hook")
    assert str(kwargs["exception"]) == "receiver is broken"
    failed = [e for e in log_events if e["event"] == "signal_receiver_failed"]
    assert [e["signal"] for e in failed] == ["job-received"]


def test_a_raising_worker_error_receiver_is_only_logged(
    bare_app: Flask, jobs: SQSJobs, handlers: None, log_events: list[EventDict]
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "double", {"n": 1})
    with (
        signals.job_started.connected_to(raising, sender=bare_app),
        signals.worker_error.connected_to(raising, sender=bare_app),
    ):
        [finished] = work_off(bare_app)

    assert finished.outcome == "success"
    failed = [e for e in log_events if e["event"] == "signal_receiver_failed"]
    assert [e["signal"] for e in failed] == ["job-started", "worker-error"]


def test_a_queue_that_cannot_be_received_from_is_a_receive_error(
    bare_app: Flask,
    jobs: SQSJobs,
    handlers: None,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    errors = Recorder()
    sqs.delete_queue(QueueUrl=queue_urls["critical"])
    with signals.worker_error.connected_to(errors, sender=bare_app):
        work_off(bare_app, queues=["critical"])

    assert errors.kwargs
    assert {(k["queue"], k["kind"]) for k in errors.kwargs} == {("critical", "receive")}
    assert all(isinstance(k["exception"], Exception) for k in errors.kwargs)


@pytest.fixture
def records_app(
    make_app: MakeApp, app_config: dict[str, t.Any], tmp_path: t.Any
) -> Flask:
    """An app whose job records go to a database that has no tables."""
    url = f"sqlite:///{tmp_path / 'never-initialised.db'}"
    return make_app({**app_config, "SQS_JOBS_STORE_URL": url})


def test_a_failing_record_write_is_a_store_error(
    records_app: Flask, jobs: SQSJobs, handlers: None
) -> None:
    errors = Recorder()
    contexts: list[object] = []

    def app_of_the_context(sender: Flask, **kwargs: t.Any) -> None:
        # On the record writer's thread, the receiver has the app's context.
        contexts.append(current_app._get_current_object())  # type: ignore[attr-defined]

    with (
        signals.worker_error.connected_to(errors, sender=records_app),
        signals.worker_error.connected_to(app_of_the_context, sender=records_app),
    ):
        with records_app.app_context():
            jobs.enqueue("default", "double", {"n": 1}, job_id="double-1")
            [finished] = work_off(records_app)
        # The writes are off the job's path, on the writer's thread.
        assert poll_until(lambda: len(errors.calls) >= 1)

    assert finished.outcome == "success"
    assert {(k["queue"], k["kind"]) for k in errors.kwargs} == {("default", "store")}
    assert all("no such table" in str(k["exception"]) for k in errors.kwargs)
    assert contexts
    assert all(app is records_app for app in contexts)
    jobs.store(records_app).close()
