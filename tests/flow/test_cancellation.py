"""Cancellation: ``jobs.cancel`` and its tombstones, on SQL stores and DynamoDB."""

from __future__ import annotations

import datetime as dt
import json
import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.testing import work_off

from tests.records.conftest import dynamodb_endpoint as dynamodb_endpoint
from tests.records.conftest import dynamodb_store as dynamodb_store
from tests.records.conftest import store as store
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def app(store: JobStore, app_config: dict[str, t.Any]) -> t.Iterator[Flask]:
    jobs = SQSJobs(store=store)
    app = Flask(__name__)
    app.config.update(app_config)
    jobs.init_app(app)
    with app.app_context():
        yield app


def _jobs(app: Flask) -> SQSJobs:
    return t.cast(SQSJobs, app.extensions["sqs_jobs"])


def test_a_store_keeps_one_tombstone_per_job_and_reads_many_at_once(
    store: JobStore,
) -> None:
    tombstones = store.cancellations()
    assert tombstones.cancel("job-a") is True
    assert tombstones.cancel("job-a") is False  # the conditional write: once
    assert tombstones.cancel("job-b") is True
    assert tombstones.cancelled([]) == set()
    assert tombstones.cancelled(["job-a", "job-c"]) == {"job-a"}
    # More ids than one DynamoDB BatchGetItem takes.
    many = [f"other-{n}" for n in range(150)] + ["job-b", "job-a"]
    assert tombstones.cancelled(many) == {"job-a", "job-b"}


def test_a_job_cancelled_before_it_arrives_is_deleted_unrun(
    app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    jobs = _jobs(app)
    ran: list[Payload] = []
    started: list[str] = []
    jobs.handler("report")(ran.append)
    jobs.enqueue("default", "report", {"n": 1}, job_id="report-1")
    jobs.enqueue("default", "report", {"n": 2}, job_id="report-2")

    assert jobs.cancel("report-1") is True
    with signals.job_started.connected_to(
        lambda app, job, **kw: started.append(job.job_id)
    ):
        finished = work_off(app)

    assert {f.job.job_id: f.outcome for f in finished} == {
        "report-1": "cancelled",
        "report-2": "success",
    }
    assert ran == [{"n": 2}]
    assert started == ["report-2"]
    assert message_count(sqs, queue_urls["default"]) == 0
    record = jobs.get_job("report-1")
    assert record is not None
    assert record.status == "cancelled"
    assert record.finished_at is not None
    assert record.started_at is None  # it never started
    assert jobs.cancel("report-1") is False  # finished now


def test_a_delayed_job_cancelled_is_deleted_when_its_delay_ends(
    app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    jobs = _jobs(app)
    ran: list[Payload] = []
    jobs.handler("report")(ran.append)
    jobs.enqueue("default", "report", {}, job_id="delayed-1", delay_seconds=2)
    assert jobs.cancel("delayed-1") is True

    finished: list[t.Any] = []
    deadline = time.monotonic() + 30
    while not finished:  # the delay ends, then the job arrives
        assert time.monotonic() < deadline, "the delayed job never arrived"
        finished = work_off(app)
    assert [f.outcome for f in finished] == ["cancelled"]
    assert ran == []
    assert message_count(sqs, queue_urls["default"]) == 0


def test_a_deferred_job_cancelled_is_deleted_when_it_comes_back(
    app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    jobs = _jobs(app)
    ran: list[Payload] = []
    jobs.handler("report")(ran.append)
    run_at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    # A deferral's copy as it arrives every 15 minutes: its run_at still ahead.
    body = json.dumps(
        {
            "job_type": "report",
            "payload": {"n": 1},
            "job_id": "later-1",
            "run_at": run_at.isoformat(),
        }
    )
    url = queue_urls["default"]
    sqs.send_message(QueueUrl=url, MessageBody=body)
    [deferred] = work_off(app)
    assert deferred.outcome == "deferred"
    record = jobs.get_job("later-1")
    assert record is not None
    assert record.status == "deferred"

    assert jobs.cancel("later-1") is True
    sqs.send_message(QueueUrl=url, MessageBody=body)  # its next copy arrives
    [cancelled] = work_off(app)

    assert cancelled.outcome == "cancelled"
    assert ran == []
    record = jobs.get_job("later-1")
    assert record is not None
    assert record.status == "cancelled"


def test_a_running_job_that_raises_once_cancelled_ends_cancelled_not_retried(
    store: JobStore,
    app_config: dict[str, t.Any],
    sqs: SQSClient,
) -> None:
    # A visibility timeout of 3 s: the running jobs' tombstones are read every 1 s.
    url = create_queue(sqs, "app-quick", visibility_timeout=3)
    queues = {**app_config["SQS_JOBS_QUEUES"], "quick": {"name": "app-quick"}}
    jobs = SQSJobs(store=store)
    app = Flask(__name__)
    app.config.update({**app_config, "SQS_JOBS_QUEUES": queues})
    jobs.init_app(app)
    seen: list[bool] = []

    @jobs.handler("step")
    def step(payload: Payload) -> None:
        assert jobs.cancel(current_job.job_id or "") is True  # e.g. from a web request
        seen.append(current_job.cancel_requested.wait(30))
        seen.append(current_job.abort_requested.is_set())
        raise RuntimeError("stopped half way")

    with app.app_context():
        jobs.enqueue("quick", "step", {}, job_id="step-1")
        [finished] = work_off(app, queues=["quick"])
        record = jobs.get_job("step-1")

    assert seen == [True, True]
    assert finished.outcome == "cancelled"
    assert not finished.will_retry
    assert message_count(sqs, url) == 0
    assert record is not None
    assert record.status == "cancelled"
    assert record.started_at is not None
    assert record.error == "RuntimeError: stopped half way"


def test_cancel_is_false_for_an_unknown_or_a_finished_job(app: Flask) -> None:
    jobs = _jobs(app)
    jobs.handler("report")(lambda payload: None)
    jobs.enqueue("default", "report", {}, job_id="done-1")
    work_off(app)

    assert jobs.cancel("done-1") is False
    assert jobs.cancel("never-sent") is False
    assert jobs.cancel("not a job id!") is False
    assert jobs.store().cancellations().cancelled(["done-1", "never-sent"]) == set()


def test_cancel_without_a_store_names_the_setting(
    make_app: t.Callable[..., Flask],
) -> None:
    app = make_app()
    with app.app_context(), pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        app.extensions["sqs_jobs"].cancel("job-1")


def test_the_cancel_command_exits_0_when_cancelled_and_1_otherwise(
    app: Flask,
) -> None:
    jobs = _jobs(app)
    jobs.handler("report")(lambda payload: None)
    jobs.enqueue("default", "report", {}, job_id="cli-1")
    runner = app.test_cli_runner()

    cancelled = runner.invoke(args=["sqs-jobs", "cancel", "cli-1"])
    assert cancelled.exit_code == 0, cancelled.output
    assert "job cli-1 cancelled" in cancelled.output
    [finished] = work_off(app)
    assert finished.outcome == "cancelled"

    for job_id in ("cli-1", "unknown-9"):
        refused = runner.invoke(args=["sqs-jobs", "cancel", job_id])
        assert refused.exit_code == 1, refused.output
        assert f"job {job_id} not cancelled" in refused.output
