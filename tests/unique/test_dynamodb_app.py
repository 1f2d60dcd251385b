"""Unique jobs in an app whose store is a DynamoDB table (moto, in process)."""

from __future__ import annotations

import typing as t

import boto3
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import DynamoDBStore

from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.idempotency.conftest import Finished
from tests.unique.polling import enqueue_once_free

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def dynamodb_app(sqs: SQSClient, queue_url: str) -> tuple[Flask, SQSJobs]:
    """An app on the ``idem-jobs`` queue whose store is a fresh DynamoDB table."""
    store = DynamoDBStore("jobs", boto_client=boto3.client("dynamodb"))
    store.create_tables()
    jobs = SQSJobs(store=store)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "idem-jobs"}},
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs.init_app(app)
    return app, jobs


def test_a_duplicate_is_skipped_until_the_job_starts(
    dynamodb_app: tuple[Flask, SQSJobs],
) -> None:
    app, jobs = dynamodb_app
    while_running: list[str] = []

    def report(payload: Payload) -> None:
        if payload.get("first"):
            while_running.append(
                enqueue_once_free(
                    jobs,
                    "j-1",
                    queue="default",
                    job_type="report",
                    payload={},
                    unique_key="k",
                    job_id="j-2",
                )
            )

    jobs.handler("report")(report)
    with app.app_context():
        jobs.enqueue("default", "report", {"first": True}, unique_key="k", job_id="j-1")
        assert jobs.enqueue("default", "report", {}, unique_key="k") == "j-1"
    finished = Finished()
    worker = jobs.create_worker(
        app, should_stop=lambda: finished.count() >= 1, hooks=[finished]
    )
    thread = WorkerThread(worker)
    assert finished.wait_for(lambda: finished.count() >= 1)
    assert thread.join(WAIT * 3) == 0

    assert finished.values() == ["success"]
    assert while_running != ["j-1"]  # sent: the key was freed as j-1 started
    with app.app_context():
        assert jobs.enqueue("default", "report", {}, unique_key="k") == "j-2"
