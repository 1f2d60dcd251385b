"""(f) Poison messages mixed into the load never crash a worker nor block others.

The mix (``POISON_MIX``, deterministic): bodies that are not JSON, not an
object, nested 50,000 deep, with a non-string ``job_type`` or a non-object
payload (all deleted); unknown job types (kept hidden for 300 s); handlers that
always raise (dead-lettered by the worker), raise ``NonRetryableError``
(deleted), raise on the first receive only, or raise ``SystemExit`` (left to
SQS's redrive); unreadable attributes and an invalid ``run_at``; 200 KB
payloads. The same workers run from start to end: none may exit.
"""

from __future__ import annotations

import collections
import random
import time

import pytest

from .conftest import Report
from .harness import assert_alive
from .harness import Fate
from .harness import FATES
from .harness import Harness
from .harness import Kind
from .harness import poison_jobs
from .harness import sized
from .harness import stop
from .harness import verdict

WORKERS = 2
VISIBILITY_TIMEOUT = 4
MAX_RECEIVE_COUNT = 3
#: How long the good jobs may take: poison must not hold them up.
GOOD_JOBS_WITHIN = 90.0


@pytest.mark.timeout(900)
def test_poison_messages(harness: Harness, report: Report) -> None:
    rng = random.Random(6)
    queue = harness.queue(
        "poison",
        visibility_timeout=VISIBILITY_TIMEOUT,
        max_receive_count=MAX_RECEIVE_COUNT,
    )
    queues = {"default": queue}
    count = sized(200, 600)
    jobs = poison_jobs("poison", count, (0, 50), rng)
    kinds = collections.Counter(job.kind.value for job in jobs)
    held = sum(1 for job in jobs if FATES[job.kind] is Fate.HELD)
    good = {job.id for job in jobs if job.kind in (Kind.WORK, Kind.BIG)}
    workers = [harness.start_worker(queues, concurrency=3) for _ in range(WORKERS)]
    started = time.monotonic()
    harness.send(queue.url, jobs)

    def good_done() -> bool:
        assert_alive(workers)
        return {run.id for run in harness.runs() if run.ev == "done"} >= good

    deadline = time.monotonic() + GOOD_JOBS_WITHIN
    while not good_done():
        assert time.monotonic() < deadline, "poison held the good jobs up"
        time.sleep(0.5)  # polling the records
    good_seconds = round(time.monotonic() - started, 1)
    harness.wait_until_settled(
        queue.url, timeout=180, remaining=held, check=lambda: assert_alive(workers)
    )
    assert stop(workers) == [0] * WORKERS
    left = harness.drain(queue.url)
    dead = harness.drain(queue.dlq_url)
    in_flight = harness.counts(queue.url)[1]
    result = verdict(jobs, harness.runs(), left, dead)
    report(
        "f: poison messages",
        server=harness.server.kind,
        faults=dict(kinds),
        good_jobs_done_after_seconds=good_seconds,
        worker_exits=0,
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert not result.lost, f"lost jobs: {result.lost}"
    assert not left
    # Unknown job types stay hidden (300 s) for a worker that knows them.
    assert in_flight - len(left) == held
