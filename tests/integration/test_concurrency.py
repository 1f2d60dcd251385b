"""Several jobs at once: as many as the worker has slots, never more."""

from __future__ import annotations

import pathlib
import signal
import typing as t

from tests.support import message_count

from .conftest import MakeQueue
from .conftest import StartWorker
from .helpers import producer
from .helpers import Record
from .helpers import wait_for_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def _most_at_once(records: list[Record]) -> int:
    edges = sorted(
        [(r["started"], 1) for r in records] + [(r["finished"], -1) for r in records]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_concurrency_4_runs_four_jobs_at_once_and_holds_no_more(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """Four blocked jobs all start before any is released, while the other two
    messages stay visible on the queue."""
    url = make_queue(visibility_timeout=30)
    release = tmp_path / "release"
    jobs = producer(sqs_client, default=url)
    for n in range(6):
        jobs.enqueue("default", "block", {"release": str(release), "n": n})

    worker = start_worker({"default": {"url": url}}, concurrency=4)
    worker.wait_for("block_started", count=4)

    attributes = sqs_client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ],
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "4"
    assert attributes["ApproximateNumberOfMessages"] == "2"
    assert len(worker.find("block_started")) == 4

    release.touch()
    records = wait_for_records(record_file, 6)
    assert sorted(r["payload"]["n"] for r in records) == list(range(6))
    assert _most_at_once(records) == 4
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert message_count(sqs_client, url) == 0
