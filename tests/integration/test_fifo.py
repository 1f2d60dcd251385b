"""FIFO queues: strict order within a message group, concurrency across groups."""

from __future__ import annotations

import itertools
import pathlib
import typing as t

from tests.support import message_count

from .conftest import MakeQueue
from .conftest import StartWorker
from .helpers import producer
from .helpers import Record
from .helpers import wait_for_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

PER_GROUP = 5


def _overlap(a: Record, b: Record) -> bool:
    return bool(a["started"] < b["finished"] and b["started"] < a["finished"])


def test_fifo_group_is_processed_strictly_in_order_with_concurrency(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """With three job threads, each group's jobs run one after another, in order,
    while the two groups progress side by side."""
    url = make_queue(fifo=True, visibility_timeout=30)
    group = producer(sqs_client, orders=url)
    for seq in range(PER_GROUP):
        for group_id in ("A", "B"):
            group.enqueue(
                "orders",
                "sleep",
                {"group": group_id, "seq": seq, "seconds": 0.5},
                message_group_id=group_id,
            )

    worker = start_worker({"orders": {"url": url}}, concurrency=3)
    records = wait_for_records(record_file, 2 * PER_GROUP, timeout=40)

    by_group = {
        group_id: sorted(
            (r for r in records if r["payload"]["group"] == group_id),
            key=lambda r: r["started"],
        )
        for group_id in ("A", "B")
    }
    for group_id, jobs in by_group.items():
        assert [r["payload"]["seq"] for r in jobs] == list(range(PER_GROUP)), group_id
        for earlier, later in itertools.pairwise(jobs):
            assert not _overlap(earlier, later), f"group {group_id} ran jobs at once"
    assert any(_overlap(a, b) for a in by_group["A"] for b in by_group["B"])
    worker.wait_for("job_finished", count=2 * PER_GROUP)
    assert message_count(sqs_client, url) == 0
