"""A worker's threads: one per slot plus a few, whatever its concurrency."""

from __future__ import annotations

import threading
import typing as t

from flask_sqs_jobs import JobWorker

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

SLOTS = 64
JOBS = 20
#: Threads a worker may add beyond one per slot: 16 for jobs whose messages
#: settle, the receive pool (a queue plus 8), the heartbeat and its calls (9),
#: the worker's own; with room to spare, far below five more per slot.
BEYOND_SLOTS = 40


def test_a_worker_of_64_slots_runs_on_one_thread_a_slot_and_a_few(
    sqs: SQSClient, queue_url: str
) -> None:
    lock = threading.Lock()
    started: list[int] = []
    finished: list[int] = []
    release = threading.Event()

    def work(payload: Payload) -> None:
        with lock:
            started.append(payload["n"])
        release.wait(WAIT)
        with lock:
            finished.append(payload["n"])

    group = one_queue_group(sqs, queue_url, visibility_timeout=30)
    group.enqueue_many("jobs", [("work", {"n": n}) for n in range(JOBS)])
    worker = JobWorker(
        group,
        {"work": work},
        should_stop=lambda: len(finished) == JOBS,
        idle_wait_seconds=0,
        concurrency=SLOTS,
    )
    before = threading.active_count()
    thread = WorkerThread(worker)
    try:
        assert poll_until(lambda: len(started) >= 10)
        alive = threading.active_count()
    finally:
        release.set()

    assert thread.join() == 0
    assert sorted(finished) == list(range(JOBS))
    assert message_count(sqs, queue_url) == 0
    assert alive - before <= SLOTS + BEYOND_SLOTS
