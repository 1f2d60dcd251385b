"""Retry policies in a real ``flask sqs-worker`` process against a real SQS server."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import pathlib
import signal
import typing as t

import pytest
from flask import Flask

from .conftest import MakeQueue
from .conftest import ROOT
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env
from .test_cli_worker import web_app as web_app  # the fixture, over app_env below

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def dead_letter_url(make_queue: MakeQueue) -> str:
    return make_queue("retry-dlq")


@pytest.fixture
def app_env(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    dead_letter_url: str,
    record_file: pathlib.Path,
) -> dict[str, str]:
    # maxReceiveCount well above every task's max_attempts: the worker itself
    # must dead-letter when the attempts run out.
    default = make_queue(
        "retry-default",
        visibility_timeout=30,
        dead_letter_url=dead_letter_url,
        max_receive_count=10,
    )
    critical = make_queue("retry-critical", visibility_timeout=30)
    queues = {
        logical: {"name": url.rsplit("/", 1)[-1]}
        for logical, url in {"default": default, "critical": critical}.items()
    }
    return {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps(queues),
        "TEST_APP_RECORD_FILE": str(record_file),
    }


@pytest.fixture
def worker(app_env: dict[str, str]) -> cabc.Iterator[WorkerProcess]:
    process = WorkerProcess(
        flask_command("sqs-worker"), env=subprocess_env(app_env), cwd=ROOT
    )
    try:
        process.wait_for("worker_started", timeout=30)
        yield process
    finally:
        process.close()


def test_a_task_failing_twice_is_retried_with_backoff_and_then_succeeds(
    web_app: Flask, worker: WorkerProcess
) -> None:
    flaky = web_app.extensions["test_app_tasks"]["flaky"]
    with web_app.app_context():
        job_id = flaky.enqueue(failures=2).job_id

    finished = worker.wait_for("job_finished", timeout=30, outcome="success")

    assert finished["job_id"] == job_id
    attempts = worker.find("flaky_attempt")
    assert [(a["attempt"], a["max_attempts"]) for a in attempts] == [
        (1, 3),
        (2, 3),
        (3, 3),
    ]
    retrying = worker.find("job_retrying", job_id=job_id)
    assert [r["attempt"] for r in retrying] == [1, 2]
    assert retrying[0]["retry_in_seconds"] == 1
    assert 1 <= retrying[1]["retry_in_seconds"] <= 2
    for line in retrying:
        due = dt.datetime.fromisoformat(line["next_attempt_at"])
        logged = dt.datetime.fromisoformat(line["timestamp"]).replace(tzinfo=dt.UTC)
        # Both times are logged to the millisecond, a moment apart.
        assert abs((due - logged).total_seconds() - line["retry_in_seconds"]) < 1
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_a_task_out_of_attempts_lands_in_the_dlq_with_its_reason(
    web_app: Flask,
    worker: WorkerProcess,
    sqs_client: SQSClient,
    dead_letter_url: str,
) -> None:
    doomed = web_app.extensions["test_app_tasks"]["doomed"]
    with web_app.app_context():
        doomed.options(job_id="doomed-1").enqueue()

    finished = worker.wait_for("job_finished", timeout=30, outcome="dead_lettered")

    assert finished["job_id"] == "doomed-1"
    assert [r["attempt"] for r in worker.find("job_retrying")] == [1]
    response = sqs_client.receive_message(
        QueueUrl=dead_letter_url,
        MessageAttributeNames=["All"],
        WaitTimeSeconds=1,
    )
    (dead,) = response["Messages"]
    assert json.loads(dead["Body"])["job_id"] == "doomed-1"
    reason = json.loads(dead["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "ConnectionError"
    assert reason["error"] == "upstream gone for good"
    assert reason["receive_count"] == 2
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
