"""A job's record through its life: queued, running, and how each attempt ended."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import JobRecord
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def app_config(
    app_config: dict[str, t.Any], store_url: str, sqs: SQSClient
) -> dict[str, t.Any]:
    dead_letters = create_queue(sqs, "app-dead-letters")
    create_queue(
        sqs, "app-last-chance", dead_letter_url=dead_letters, max_receive_count=1
    )
    queues = {**app_config["SQS_JOBS_QUEUES"], "last": {"name": "app-last-chance"}}
    return {**app_config, "SQS_JOBS_QUEUES": queues, "SQS_JOBS_STORE_URL": store_url}


@pytest.fixture
def app(make_app: MakeApp, jobs: SQSJobs) -> t.Iterator[Flask]:
    app = make_app()
    jobs.store(app).create_tables()
    with app.app_context():
        yield app
    jobs.store(app).close()


def record(jobs: SQSJobs, job_id: str) -> JobRecord:
    found = jobs.get_job(job_id)
    assert found is not None, f"no record of {job_id}"
    return found


def enqueued_id(jobs: SQSJobs, queue: str, job_type: str, **payload: t.Any) -> str:
    job_id = f"{job_type}-{len(payload)}-{dt.datetime.now().timestamp():.6f}"
    jobs.enqueue(queue, job_type, payload, job_id=job_id)
    return job_id


def test_a_job_is_queued_then_running_then_succeeded_with_its_result(
    app: Flask, jobs: SQSJobs
) -> None:
    seen_while_running: list[JobRecord] = []

    @jobs.handler("add")
    def add(payload: Payload) -> dict[str, int]:
        seen_while_running.append(record(jobs, current_job.job_id or ""))
        return {"sum": payload["a"] + payload["b"]}

    job_id = enqueued_id(jobs, "default", "add", a=2, b=3)
    queued = record(jobs, job_id)
    assert (queued.status, queued.attempts, queued.job_type, queued.queue) == (
        "queued",
        0,
        "add",
        "default",
    )
    assert queued.enqueued_at is not None

    [finished] = work_off(app)
    assert finished.outcome == "success"
    assert [r.status for r in seen_while_running] == ["running"]
    done = record(jobs, job_id)
    assert (done.status, done.attempts, done.result, done.error) == (
        "succeeded",
        1,
        {"sum": 5},
        None,
    )
    assert done.enqueued_at <= done.started_at <= done.finished_at  # type: ignore[operator]


def test_a_retried_job_is_retrying_then_succeeds_on_its_second_attempt(
    app: Flask, jobs: SQSJobs
) -> None:
    @jobs.handler("flaky")
    def flaky(payload: Payload) -> None:
        if current_job.receive_count == 1:
            raise RetryJob(delay_seconds=0)

    job_id = enqueued_id(jobs, "default", "flaky")
    work_off(app, max_jobs=1)
    retrying = record(jobs, job_id)
    assert (retrying.status, retrying.attempts) == ("retrying", 1)
    assert str(retrying.error).startswith("RetryJob")
    assert retrying.finished_at is None
    work_off(app)
    done = record(jobs, job_id)
    assert (done.status, done.attempts, done.error) == ("succeeded", 2, None)


def test_a_non_retryable_error_leaves_a_failed_record_with_the_error(
    app: Flask, jobs: SQSJobs
) -> None:
    @jobs.handler("refuse")
    def refuse(payload: Payload) -> None:
        raise NonRetryableError("bad input\nline two")

    job_id = enqueued_id(jobs, "default", "refuse")
    work_off(app)
    failed = record(jobs, job_id)
    assert (failed.status, failed.error) == (
        "failed",
        "NonRetryableError: bad input\\nline two",
    )
    assert failed.finished_at is not None


def test_a_job_failing_its_last_receive_is_dead_lettered(
    app: Flask, jobs: SQSJobs
) -> None:
    @jobs.handler("doomed")
    def doomed(payload: Payload) -> None:
        raise RuntimeError("still broken")

    job_id = enqueued_id(jobs, "last", "doomed")
    work_off(app, queues=["last"])
    dead = record(jobs, job_id)
    assert (dead.status, dead.error) == ("dead_lettered", "RuntimeError: still broken")


def test_a_job_not_due_yet_is_deferred(
    app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    jobs.handler("later")(lambda payload: None)
    run_at = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    body = {"job_type": "later", "payload": {}, "job_id": "later-1", "run_at": run_at}
    sqs.send_message(QueueUrl=queue_urls["default"], MessageBody=json.dumps(body))
    [finished] = work_off(app)
    assert finished.outcome == "deferred"
    deferred = record(jobs, "later-1")
    assert (deferred.status, deferred.started_at, deferred.error) == (
        "deferred",
        None,
        None,
    )


def test_progress_is_recorded_escaped_and_checked(app: Flask, jobs: SQSJobs) -> None:
    errors: list[Exception] = []

    @jobs.handler("long")
    def long(payload: Payload) -> None:
        current_job.set_progress(0.25)
        current_job.set_progress(0.5, "half way\x1b[2J")
        for bad in (1.5, float("nan"), True):
            try:
                current_job.set_progress(bad)
            except ValueError as exc:
                errors.append(exc)

    job_id = enqueued_id(jobs, "default", "long")
    work_off(app)
    done = record(jobs, job_id)
    assert (done.status, done.progress, done.progress_message) == (
        "succeeded",
        0.5,
        "half way\\x1b[2J",
    )
    assert len(errors) == 3
    assert "a fraction from 0 to 1" in str(errors[0])


def test_get_job_of_an_unknown_job_is_none(app: Flask, jobs: SQSJobs) -> None:
    assert jobs.get_job("never-enqueued") is None
    assert jobs.get_job("not a job id!") is None


def test_a_result_that_is_not_json_is_left_out(
    app: Flask, jobs: SQSJobs, log_events: list[EventDict]
) -> None:
    jobs.handler("odd")(lambda payload: {1, 2})
    job_id = enqueued_id(jobs, "default", "odd")
    [finished] = work_off(app)
    assert finished.outcome == "success"
    assert (record(jobs, job_id).status, record(jobs, job_id).result) == (
        "succeeded",
        None,
    )
    assert any(e["event"] == "job_result_not_recorded" for e in log_events)


def test_eager_mode_records_synchronously(
    make_app: MakeApp, jobs: SQSJobs, app_config: dict[str, t.Any]
) -> None:
    app = make_app({**app_config, "SQS_JOBS_EAGER": True})
    jobs.store(app).create_tables()
    jobs.handler("echo")(lambda payload: payload)
    with app.app_context():
        jobs.enqueue("default", "echo", {"x": 1}, job_id="eager-1")
        assert (record(jobs, "eager-1").status, record(jobs, "eager-1").result) == (
            "succeeded",
            {"x": 1},
        )
    jobs.store(app).close()


def test_records_off_writes_nothing(
    make_app: MakeApp, jobs: SQSJobs, app_config: dict[str, t.Any]
) -> None:
    app = make_app({**app_config, "SQS_JOBS_RECORD_JOBS": False})
    jobs.store(app).create_tables()
    jobs.handler("quiet")(lambda payload: current_job.set_progress(0.5))
    with app.app_context():
        jobs.enqueue("default", "quiet", {}, job_id="quiet-1")
        [finished] = work_off(app)
        assert finished.outcome == "success"
        assert jobs.get_job("quiet-1") is None
    jobs.store(app).close()


def test_get_job_without_a_store_names_the_setting(
    make_app: MakeApp, jobs: SQSJobs, app_config: dict[str, t.Any]
) -> None:
    config = {k: v for k, v in app_config.items() if k != "SQS_JOBS_STORE_URL"}
    app = make_app(config)
    with app.app_context(), pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.get_job("any")
