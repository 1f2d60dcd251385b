"""Visibility timeouts, the heartbeat and dead letters against a real server."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import time
import typing as t
from unittest import mock

from tests.support import message_count
from tests.support import visible_messages

from .conftest import MakeQueue
from .conftest import StartWorker
from .helpers import log_time
from .helpers import producer
from .helpers import read_records
from .helpers import wait_for_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def test_failed_job_is_processed_again_after_the_visibility_timeout(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    url = make_queue(visibility_timeout=2)
    producer(sqs_client, default=url).enqueue("default", "flaky", {"failures": 1})

    worker = start_worker({"default": {"url": url}})

    worker.wait_for("job_finished", outcome="retry", receive_count=1)
    worker.wait_for("job_finished", outcome="success", receive_count=2)
    first_start = worker.wait_for("job_started", receive_count=1)
    second_start = worker.wait_for("job_started", receive_count=2)
    # Not redelivered at once: the message stayed hidden for the queue's
    # visibility timeout (2 s from the receive, just before the first start).
    assert log_time(second_start) - log_time(first_start) >= 1.0
    assert [r["receive_count"] for r in read_records(record_file)] == [1, 2]
    assert message_count(sqs_client, url) == 0


def test_heartbeat_keeps_a_long_job_invisible_and_it_runs_once(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """A 5 s job on a queue with a 2 s visibility timeout is never redelivered."""
    url = make_queue(visibility_timeout=2)
    producer(sqs_client, default=url).enqueue("default", "sleep", {"seconds": 5})

    worker = start_worker({"default": {"url": url}})
    worker.wait_for("job_started")

    # Watch the queue from another client for the whole job: each long poll
    # returns the moment the message would become visible.
    checks = 0
    deadline = time.monotonic() + 30
    while not worker.find("job_finished") and time.monotonic() < deadline:
        stolen = sqs_client.receive_message(QueueUrl=url, WaitTimeSeconds=1)
        assert stolen.get("Messages", []) == [], "the running job's message was visible"
        checks += 1
    finished = worker.wait_for("job_finished")

    assert finished["outcome"] == "success"
    assert finished["duration_ms"] >= 5000
    assert checks >= 3
    assert len(worker.find("job_started")) == 1
    assert len(read_records(record_file)) == 1
    assert message_count(sqs_client, url) == 0


def test_job_failing_its_last_receive_is_moved_to_the_dlq_with_its_reason(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    dlq = make_queue("dlq")
    url = make_queue(visibility_timeout=1, dead_letter_url=dlq, max_receive_count=2)
    message_id = producer(sqs_client, default=url).enqueue(
        "default",
        "fail",
        {"error": "boom"},
        correlation_fields={"request_id": "r-1"},
    )

    worker = start_worker({"default": {"url": url}})

    worker.wait_for("job_finished", outcome="retry", receive_count=1)
    moved = worker.wait_for("job_finished", outcome="dead_lettered")
    assert moved["receive_count"] == 2
    assert moved["message_id"] == message_id
    assert len(wait_for_records(record_file, 2)) == 2

    [dead] = visible_messages(sqs_client, dlq)
    assert json.loads(dead["Body"]) == {
        "job_type": "fail",
        "payload": {"error": "boom"},
        "job_id": mock.ANY,
    }
    attributes = dead["MessageAttributes"]
    assert json.loads(attributes["correlation_fields"]["StringValue"]) == {
        "request_id": "r-1"
    }
    reason = json.loads(attributes["dead_letter"]["StringValue"])
    assert set(reason) == {
        "error_type",
        "error",
        "failed_at",
        "source_queue",
        "receive_count",
    }
    assert reason["error_type"] == "RuntimeError"
    assert reason["error"] == "boom"
    assert reason["source_queue"] == "default"
    assert reason["receive_count"] == 2
    failed_at = dt.datetime.fromisoformat(reason["failed_at"])
    assert failed_at.tzinfo is not None
    assert abs(failed_at.timestamp() - log_time(moved)) < 60
    assert message_count(sqs_client, url) == 0


def test_job_past_its_max_runtime_loses_its_message_and_does_not_delete_it(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    tmp_path: pathlib.Path,
) -> None:
    """After ``max_runtime_seconds`` the heartbeat stops, another consumer gets
    the message, and the job finishing later leaves that message alone."""
    url = make_queue(visibility_timeout=2)
    release = tmp_path / "release"
    producer(sqs_client, default=url).enqueue(
        "default", "block", {"release": str(release)}
    )
    worker = start_worker({"default": {"url": url, "max_runtime_seconds": 1}})
    worker.wait_for("block_started")
    worker.wait_for("max_runtime_exceeded", timeout=10)

    taken: list[str] = []
    deadline = time.monotonic() + 15
    while not taken and time.monotonic() < deadline:
        response = sqs_client.receive_message(
            QueueUrl=url,
            WaitTimeSeconds=1,
            VisibilityTimeout=60,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        taken = [
            m["Attributes"]["ApproximateReceiveCount"]
            for m in response.get("Messages", [])
        ]
    assert taken == ["2"], "the message did not come back after the heartbeat stopped"
    release.touch()

    finished = worker.wait_for("job_finished")
    assert finished["outcome"] == "heartbeat_failed"
    assert message_count(sqs_client, url) == 1
