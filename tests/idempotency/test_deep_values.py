"""Deep payloads either run or are refused as malformed: never a store failure."""

from __future__ import annotations

import json
import typing as t

from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.engine.helpers import events
from tests.engine.test_json_depth import body_of_depth
from tests.engine.test_json_depth import payload_of_depth
from tests.idempotency.conftest import RunWorker
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def test_a_payload_at_the_bound_runs_once_and_then_is_a_duplicate(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[int] = []
    jobs.handler("charge", idempotent=True)(lambda payload: runs.append(1))
    payload = payload_of_depth(512)
    with store_app.app_context():
        jobs.enqueue("default", "charge", payload, job_id="deep-1")
        jobs.enqueue("default", "charge", payload, job_id="deep-1")
    finished = run_worker(lambda f: f.count() >= 2)

    assert finished.values() == ["success", "duplicate"]
    assert runs == [1]


def test_a_body_deeper_than_the_bound_is_deleted_as_malformed_not_retried(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    sqs: SQSClient,
    queue_url: str,
    log_events: list[EventDict],
) -> None:
    runs: list[int] = []
    jobs.handler("t", idempotent=True)(lambda payload: runs.append(1))
    for levels in (513, 985):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body_of_depth(levels))
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps({"job_type": "t", "payload": {}, "job_id": "after"}),
    )

    def malformed() -> list[EventDict]:
        return events(log_events, "malformed_message_deleted")

    finished = run_worker(lambda f: f.count() >= 1 and len(malformed()) >= 2)

    assert finished.values() == ["success"]
    assert runs == [1]
    assert [line["reason"] for line in malformed()] == [
        "body is nested more than 513 levels deep"
    ] * 2
    assert message_count(sqs, queue_url) == 0
    assert events(log_events, "idempotency_claim_failed") == []
