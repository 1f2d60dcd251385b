"""More slots never mean fewer jobs: every slot gets a job while jobs wait."""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask_sqs_jobs import JobWorker

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.mark.parametrize("slots", [7, 12, 24, 33])
def test_as_many_blocking_jobs_as_slots_all_start(
    sqs: SQSClient, queue_url: str, slots: int
) -> None:
    # Receives bring ten at most: the last slots must not wait for a job to end.
    lock = threading.Lock()
    started: set[int] = set()
    release = threading.Event()

    def block(payload: Payload) -> None:
        with lock:
            started.add(payload["n"])
        release.wait(WAIT)

    group = one_queue_group(sqs, queue_url, visibility_timeout=60)
    group.enqueue_many("jobs", [("block", {"n": n}) for n in range(slots)])
    worker = JobWorker(
        group,
        {"block": block},
        should_stop=release.is_set,
        idle_wait_seconds=1,
        concurrency=slots,
    )
    thread = WorkerThread(worker)
    try:
        everyone = poll_until(lambda: len(started) == slots)
    finally:
        release.set()
    assert thread.join() == 0
    assert everyone, f"{len(started)} of {slots} jobs started"
