"""Stopping a worker process with signals: graceful first, forced second."""

from __future__ import annotations

import json
import pathlib
import signal
import typing as t

import pytest

from tests.support import message_count
from tests.support import visible_messages

from .conftest import MakeQueue
from .conftest import StartWorker
from .helpers import producer
from .helpers import read_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

STOP_SIGNALS = pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"]
)


def _queue_state(client: SQSClient, url: str) -> tuple[int, int]:
    """(visible, in flight) messages on the queue."""
    attributes = client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def _bodies(client: SQSClient, url: str) -> list[dict[str, t.Any]]:
    """The visible bodies, sorted, each less its (random) job_id."""
    bodies = [json.loads(m["Body"]) for m in visible_messages(client, url)]
    for body in bodies:
        assert isinstance(body.pop("job_id"), str)
    return sorted(bodies, key=json.dumps)


@STOP_SIGNALS
def test_stop_signal_lets_the_running_job_finish_and_exits_0(
    signum: signal.Signals,
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """The blocked job completes after the signal, its message is deleted, and
    the jobs still waiting on the queue are left alone."""
    url = make_queue(visibility_timeout=30)
    jobs = producer(sqs_client, default=url)
    release = tmp_path / "release"
    jobs.enqueue("default", "block", {"release": str(release)})
    worker = start_worker({"default": {"url": url}})
    worker.wait_for("block_started")
    # The only job slot is busy, so these stay on the queue.
    jobs.enqueue("default", "record", {"n": 1})
    jobs.enqueue("default", "record", {"n": 2})

    worker.send_signal(signum)
    worker.wait_for("worker_stopping")
    assert worker.returncode is None, "the worker did not wait for its running job"
    release.touch()

    assert worker.wait() == 0
    assert worker.find("job_finished", outcome="success", job_type="block")
    assert worker.find("worker_stopped", reason="stop_requested", exit_status=0)
    assert [r["handler"] for r in read_records(record_file)] == ["block"]
    assert _queue_state(sqs_client, url) == (2, 0)
    assert _bodies(sqs_client, url) == [
        {"job_type": "record", "payload": {"n": 1}},
        {"job_type": "record", "payload": {"n": 2}},
    ]


@STOP_SIGNALS
def test_message_received_after_the_stop_request_is_visible_again_at_once(
    signum: signal.Signals,
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """A job that the in-flight long poll returns after the signal is not run:
    its visibility is reset, so another worker can take it at once."""
    url = make_queue(visibility_timeout=30)
    jobs = producer(sqs_client, default=url)
    release = tmp_path / "release"
    jobs.enqueue("default", "block", {"release": str(release)})
    worker = start_worker({"default": {"url": url}}, concurrency=2, idle_wait=20)
    worker.wait_for("block_started")
    # The free slot found the queue empty and now long-polls it.
    worker.wait_for("receive_empty", wait_seconds=0)

    worker.send_signal(signum)
    worker.wait_for("worker_stopping")
    jobs.enqueue("default", "record", {"late": True})
    release.touch()

    assert worker.wait(timeout=30) == 0
    assert [r["handler"] for r in read_records(record_file)] == ["block"]
    assert not worker.find("job_started", job_type="record")
    # Visible now, whether the long poll took it (and released it) or not.
    assert _bodies(sqs_client, url) == [
        {"job_type": "record", "payload": {"late": True}}
    ]
    assert message_count(sqs_client, url) == 1
    assert [e["count"] for e in worker.find("messages_released")] in ([], [1])


@STOP_SIGNALS
def test_second_signal_exits_at_once_and_releases_the_blocked_job(
    signum: signal.Signals,
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """The process exits with 128 + the signal number, without waiting for the
    job, and the job's message can be received again straight away."""
    url = make_queue(visibility_timeout=30)
    release = tmp_path / "never-created"
    producer(sqs_client, default=url).enqueue(
        "default", "block", {"release": str(release)}
    )
    worker = start_worker({"default": {"url": url}})
    worker.wait_for("block_started")

    worker.send_signal(signum)
    worker.wait_for("stop_signal_received", action="graceful")
    worker.send_signal(signum)

    assert worker.wait(timeout=10) == 128 + signum
    assert worker.find("stop_signal_received", action="forced")
    assert read_records(record_file) == []
    assert _bodies(sqs_client, url) == [
        {"job_type": "block", "payload": {"release": str(release)}}
    ]
