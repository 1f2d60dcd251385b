"""A DynamoDB store keeps the records of a Flask app's jobs."""

from __future__ import annotations

import typing as t

from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.testing import work_off

from tests.records.test_job_lifecycle import record

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def test_a_dynamodb_store_records_the_job_too(
    sqs: SQSClient,
    queue_urls: dict[str, str],
    dynamodb_store: DynamoDBStore,
    app_config: dict[str, t.Any],
) -> None:
    jobs = SQSJobs(store=dynamodb_store)
    app = Flask(__name__)
    app.config.update(app_config)
    jobs.init_app(app)
    jobs.handler("add")(lambda payload: {"sum": payload["a"] + payload["b"]})
    with app.app_context():
        jobs.enqueue("default", "add", {"a": 1, "b": 2}, job_id="dynamo-1")
        assert record(jobs, "dynamo-1").status == "queued"
        work_off(app)
        done = record(jobs, "dynamo-1")
    assert (done.status, done.attempts, done.result) == ("succeeded", 1, {"sum": 3})
