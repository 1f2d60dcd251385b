"""Receive failures: the worker gives up on a dead endpoint, not on one bad queue."""

from __future__ import annotations

import json
import pathlib
import signal
import typing as t

from tests.support import message_count

from .conftest import MakeQueue
from .conftest import StartWorker
from .conftest import unique_name
from .helpers import producer
from .helpers import read_records
from .helpers import wait_for_records
from .servers import refusing_endpoint

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: The receive-failure backoff cap in these tests (30 s in production).
SHORT_BACKOFF = 0.1


def test_worker_exits_1_after_ten_failed_receives_per_queue(
    start_worker: StartWorker,
) -> None:
    """Against an endpoint that refuses connections, every queue fails ten
    times in a row and the process exits with status 1."""
    with refusing_endpoint() as dead:
        queues = {
            name: {"url": f"{dead}/000000000000/{name}", "visibility_timeout": 30}
            for name in ("first", "second")
        }
        worker = start_worker(queues, endpoint=dead, max_receive_backoff=SHORT_BACKOFF)
        status = worker.wait(timeout=30)

    assert status == 1
    for name in queues:
        failures = worker.find("receive_failed", queue=name)
        assert [e["attempt"] for e in failures][:10] == list(range(1, 11)), name
    assert worker.find("worker_giving_up")
    assert worker.find("worker_stopped", reason="receive_failures", exit_status=1)
    assert not worker.find("job_started")


def test_broken_queue_is_reported_while_the_healthy_queue_is_served(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """A queue that does not exist keeps failing and is reported, yet the worker
    keeps serving the healthy queue past ten failures and stops cleanly."""
    healthy = make_queue("healthy")
    broken = _sibling_url(healthy, unique_name("missing"))
    jobs = producer(sqs_client, healthy=healthy)
    for n in range(5):
        jobs.enqueue("healthy", "record", {"n": n})

    worker = start_worker(
        {"healthy": {"url": healthy}, "broken": {"url": broken}},
        max_receive_backoff=SHORT_BACKOFF,
    )

    assert len(wait_for_records(record_file, 5)) == 5
    # Past the ten failures that would stop a worker whose every queue fails.
    worker.wait_for("receive_failed", queue="broken", attempt=11)
    jobs.enqueue("healthy", "record", {"n": 5})
    records = wait_for_records(record_file, 6)
    assert sorted(r["payload"]["n"] for r in records) == list(range(6))
    assert worker.returncode is None

    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not worker.find("receive_failed", queue="healthy")
    failures = worker.find("receive_failed", queue="broken")
    assert all(isinstance(e["error"], str) and e["error"] for e in failures)
    assert message_count(sqs_client, healthy) == 0


def test_failing_queue_is_retried_after_its_backoff_while_others_long_poll(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """A queue that starts working again is polled after its short backoff, not
    only when the healthy queue's 20 s long poll ends, and its jobs then run."""
    healthy = make_queue("healthy")
    late_name = unique_name("late")
    late = _sibling_url(healthy, late_name)
    worker = start_worker(
        {"healthy": {"url": healthy}, "late": {"url": late, "visibility_timeout": 30}},
        idle_wait=20,
        max_receive_backoff=SHORT_BACKOFF,
    )
    worker.wait_for("receive_failed", queue="late", attempt=2, timeout=5)

    assert make_queue(name=late_name) == late
    sqs_client.send_message(
        QueueUrl=late,
        MessageBody=json.dumps({"job_type": "record", "payload": {"n": 1}}),
    )
    # The healthy queue's long poll still has over 15 s to run.
    worker.wait_for("job_finished", queue="late", outcome="success", timeout=5)
    assert worker.find("receive_recovered", queue="late")
    assert [r["queue"] for r in read_records(record_file)] == ["late"]


def _sibling_url(url: str, name: str) -> str:
    """The URL a queue named ``name`` has (or would have) on the same server."""
    return url.rsplit("/", 1)[0] + "/" + name
