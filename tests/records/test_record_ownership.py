"""A job's record belongs to its job and type: no other message takes it over.

Each test runs on SQLite, PostgreSQL and DynamoDB (moto_server).
"""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.ops._metrics import PrometheusMetrics
from flask_sqs_jobs.store import JobRecord
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.testing import work_off

from tests.engine.helpers import events
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def jobs(store: JobStore) -> SQSJobs:
    return SQSJobs(store=store)


@pytest.fixture
def app(
    jobs: SQSJobs, sqs: SQSClient, app_config: dict[str, t.Any]
) -> cabc.Iterator[Flask]:
    dead_letters = create_queue(sqs, "own-dead-letters")
    create_queue(sqs, "own-jobs", dead_letter_url=dead_letters, visibility_timeout=30)
    app = Flask(__name__)
    queues = {**app_config["SQS_JOBS_QUEUES"], "guarded": {"name": "own-jobs"}}
    app.config.update({**app_config, "SQS_JOBS_QUEUES": queues})
    jobs.init_app(app)
    with app.app_context():
        yield app


def record(jobs: SQSJobs, job_id: str) -> JobRecord:
    found = jobs.get_job(job_id)
    assert found is not None, f"no record of {job_id}"
    return found


def send_raw(sqs: SQSClient, url: str, body: Payload) -> None:
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))


def refusals_counted() -> float:
    text = PrometheusMetrics().render()[0].decode()
    for line in text.splitlines():
        if line.startswith('sqs_jobs_store_errors_total{part="job_record_conflicts"}'):
            return float(line.split()[-1])
    return 0.0


def deep(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("forged_first", [False, True])
def test_a_message_reusing_a_job_id_under_another_type_never_takes_its_record(
    app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
    forged_first: bool,
) -> None:
    ran: list[str] = []

    @jobs.handler("charge")
    def charge(payload: Payload) -> Payload:
        ran.append("charge")
        return {"charged": payload["amount"]}

    @jobs.handler("refund")
    def refund(payload: Payload) -> Payload:
        ran.append("refund")
        return {"forged": True}

    before = refusals_counted()
    forged = {"job_type": "refund", "payload": {"amount": 1}, "job_id": "order-7"}
    if forged_first:
        # Before the real job runs: its queued record already fixed the type.
        jobs.enqueue("default", "charge", {"amount": 5}, job_id="order-7")
        send_raw(sqs, queue_urls["default"], forged)
        work_off(app)
    else:
        jobs.enqueue("default", "charge", {"amount": 5}, job_id="order-7")
        work_off(app)
        send_raw(sqs, queue_urls["default"], forged)
        [finished] = work_off(app)
        assert finished.outcome == "success"

    assert sorted(ran) == ["charge", "refund"]
    done = record(jobs, "order-7")
    assert (done.job_type, done.status, done.attempts) == ("charge", "succeeded", 1)
    assert (done.result, done.error) == ({"charged": 5}, None)
    [line] = events(log_events, "job_record_refused")
    assert (line["job_id"], line["recorded_job_type"], line["refused_job_type"]) == (
        "order-7",
        "charge",
        "refund",
    )
    assert refusals_counted() - before == 1


def test_a_job_id_reused_with_another_payload_leaves_the_succeeded_record(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> Payload:
        return {"charged": payload["amount"]}

    jobs.enqueue("guarded", "charge", {"amount": 5}, job_id="order-7")
    [first] = work_off(app)
    jobs.enqueue("guarded", "charge", {"amount": 6}, job_id="order-7")
    [conflict] = work_off(app)

    assert (first.outcome, conflict.outcome) == ("success", "dead_lettered")
    done = record(jobs, "order-7")
    assert (done.status, done.attempts, done.result, done.error) == (
        "succeeded",
        1,
        {"charged": 5},
        None,
    )
    assert done.finished_at is not None


def test_a_duplicate_delivery_leaves_the_record_of_the_run_it_duplicates(
    app: Flask, jobs: SQSJobs
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> Payload:
        return {"charged": payload["amount"]}

    @jobs.handler("invoice", idempotency_key=lambda payload: str(payload["order"]))
    def invoice(payload: Payload) -> Payload:
        return {"invoiced": payload["order"]}

    jobs.enqueue("default", "charge", {"amount": 5}, job_id="order-1")
    jobs.enqueue("default", "charge", {"amount": 5}, job_id="order-1")
    jobs.enqueue("default", "invoice", {"order": 1}, job_id="invoice-a")
    work_off(app)
    jobs.enqueue("default", "invoice", {"order": 1}, job_id="invoice-b")
    outcomes = [f.outcome for f in work_off(app)]

    assert outcomes == ["duplicate"]
    charged = record(jobs, "order-1")
    assert (charged.status, charged.result) == ("succeeded", {"charged": 5})
    # Another job id whose key was completed: that job is the duplicate.
    assert record(jobs, "invoice-a").status == "succeeded"
    assert record(jobs, "invoice-b").status == "duplicate"


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_result_too_deep_to_keep_still_finishes_the_record_once(
    app: Flask, jobs: SQSJobs, idempotent: bool
) -> None:
    runs: list[int] = []

    @jobs.handler("nest", idempotent=idempotent)
    def nest(payload: Payload) -> object:
        runs.append(1)
        return deep(1500)

    jobs.enqueue("default", "nest", {}, job_id="deep-1")
    jobs.enqueue("default", "nest", {}, job_id="deep-1")
    outcomes = [f.outcome for f in work_off(app)]

    assert outcomes == (["success", "duplicate"] if idempotent else ["success"] * 2)
    assert len(runs) == (1 if idempotent else 2)
    done = record(jobs, "deep-1")
    assert (done.status, done.result) == ("succeeded", None)
    assert done.error == "result not recorded: nested more than 512 levels deep"
    assert done.finished_at is not None
