"""(c) The endpoint flapping: workers back off, recover, and only give up for good.

The proxy refuses connections for 5-20 s at a time while jobs keep arriving,
and one of the three queues fails every call for the whole test. The workers
must never exit while a queue is reachable, must back off exponentially, must
process every job once the endpoint is back, and must exit 1 once the
endpoint stays down (every queue failing 10 times in a row).
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import itertools
import random
import time
import typing as t

import pytest

from tests.integration.helpers import log_time
from tests.integration.processes import WorkerProcess

from .conftest import Report
from .harness import assert_alive
from .harness import Harness
from .harness import Job
from .harness import mode
from .harness import plain_jobs
from .harness import QueuePair
from .harness import sized
from .harness import stop
from .harness import verdict
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

WORKERS = 2
#: The worker's backoff cap (``MAX_RECEIVE_BACKOFF``) and failure limit.
BACKOFF_CAP = 30.0
FAILURE_LIMIT = 10
#: A retry may come this much later than its backoff: botocore's own retries
#: of a refused connection, and scheduling.
RETRY_SLACK = 6.0


def _send_split(harness: Harness, jobs: cabc.Sequence[Job], a: str, b: str) -> None:
    """Even-numbered jobs to queue a, odd-numbered ones to queue b."""
    harness.send(a, [job for job in jobs if int(job.id[-5:]) % 2 == 0])
    harness.send(b, [job for job in jobs if int(job.id[-5:]) % 2 == 1])


def _check_backoff(workers: cabc.Iterable[WorkerProcess]) -> int:
    """Each queue's receive retries wait their own exponential backoff: at least
    half the step, and not much longer than the wait drawn (a queue is retried
    when its own backoff ends, whatever the other queues' backoffs). Return the
    number of receive failures seen."""
    failures = 0
    for worker in workers:
        by_queue: dict[str, list[dict[str, t.Any]]] = collections.defaultdict(list)
        for event in worker.find("receive_failed"):
            failures += 1
            step = min(BACKOFF_CAP, 2.0 ** (int(event["attempt"]) - 1))
            assert float(event["retry_in_seconds"]) >= step / 2 - 0.01, event
            by_queue[str(event["queue"])].append(event)
        for events in by_queue.values():
            for before, after in itertools.pairwise(events):
                if int(after["attempt"]) != int(before["attempt"]) + 1:
                    continue  # the queue recovered in between
                waited = log_time(after) - log_time(before)
                late = waited - float(before["retry_in_seconds"])
                assert late < RETRY_SLACK, (before, after)
    return failures


def _recovery_seconds(
    workers: cabc.Iterable[WorkerProcess], restored: cabc.Sequence[float]
) -> float:
    """The longest time from the endpoint coming back to a worker's first good
    receive (each recovery measured from the latest restore before it)."""
    longest = 0.0
    for worker in workers:
        for event in worker.find("receive_recovered"):
            at = log_time(event)
            before = [r for r in restored if r <= at]
            if before:
                longest = max(longest, at - before[-1])
    return round(longest, 1)


@pytest.mark.timeout(1500)
def test_flapping_endpoint(harness: Harness, proxy: FaultProxy, report: Report) -> None:
    rng = random.Random(3)
    a = harness.queue("flap-a", visibility_timeout=10)
    b = harness.queue("flap-b", visibility_timeout=10)
    broken = harness.queue("flap-broken", visibility_timeout=10)
    queues: dict[str, QueuePair] = {"a": a, "b": b, "broken": broken}
    proxy.add(Rule(Fault.HTTP_500, queue=broken.name))

    windows = [(rng.uniform(3, 8), rng.uniform(5, 20)) for _ in range(sized(2, 6))]
    count = sized(150, 500)
    jobs = plain_jobs("flap", count, (20, 200), rng)
    workers = [harness.start_worker(queues, concurrency=2) for _ in range(WORKERS)]
    started = time.monotonic()
    rate = count / sum(up + down for up, down in windows)
    sent = 0

    def produce_for(seconds: float) -> None:
        nonlocal sent
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            due = min(count, int((time.monotonic() - started) * rate) + 1)
            if due > sent:
                _send_split(harness, jobs[sent:due], a.url, b.url)
                sent = due
            assert_alive(workers)
            time.sleep(0.2)  # the pace of the producer

    restored: list[float] = []
    for up, down in windows:
        produce_for(up)
        proxy.refuse()
        produce_for(down)
        proxy.restore()
        restored.append(time.time())
    _send_split(harness, jobs[sent:], a.url, b.url)

    for queue in (a, b):
        harness.wait_until_settled(
            queue.url, timeout=180, check=lambda: assert_alive(workers)
        )
    failures = _check_backoff(workers)
    recovery = _recovery_seconds(workers, restored)
    assert recovery <= BACKOFF_CAP + 15
    for worker in workers:
        attempts = [
            int(e["attempt"])
            for e in worker.find("receive_failed")
            if e["queue"] != "broken"
        ]
        assert max(attempts, default=0) < FAILURE_LIMIT

    # Now the endpoint goes away for good: every queue fails, the workers exit 1.
    if mode() != "full":
        # The short tier gives up faster: a fresh worker with a 1 s backoff cap.
        assert stop(workers) == [0] * WORKERS
        workers = [
            harness.start_worker(
                queues, concurrency=2, env={"FAULT_APP_MAX_RECEIVE_BACKOFF": "1"}
            )
        ]
    down_at = time.monotonic()
    proxy.refuse()
    statuses = [worker.wait(400) for worker in workers]
    gave_up_after = round(time.monotonic() - down_at, 1)
    assert statuses == [1] * len(workers)
    for worker in workers:
        worker.wait_for("worker_giving_up", timeout=1)

    left = harness.drain(a.url) + harness.drain(b.url)
    dead = harness.drain(a.dlq_url) + harness.drain(b.dlq_url)
    result = verdict(jobs, harness.runs(), left, dead)
    figures: dict[str, t.Any] = {
        "refusal_windows": proxy.refusals - 1,
        "refused_seconds": round(proxy.refused_seconds, 1),
        **proxy.injected(),
        "receive_failures_logged": failures,
    }
    report(
        "c: endpoint flapping",
        server=harness.server.kind,
        faults=figures,
        longest_recovery_seconds=recovery,
        exit_1_after_seconds=gave_up_after,
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert not result.lost, f"lost jobs: {result.lost}"
    assert not left
