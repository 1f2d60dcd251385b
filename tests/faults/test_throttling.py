"""(d) Throttling storms and slow responses: the worker causes no duplicate run.

Jobs run longer than the visibility timeout (6 s), so each needs the heartbeat.
Every call may be delayed (up to 2.5 s before and after the server, below the
visibility timeout), and storms of throttling errors come and go. A job may
run twice only when SQS made a call about it fail for good (a heartbeat
extension or a delete, after botocore's own retries); a second run without
such a failure, and without any fault on its requests in the visibility timeout
before the redelivery, means the worker let the visibility lapse by itself.
"""

from __future__ import annotations

import random
import time
import typing as t

import pytest

from .conftest import Report
from .harness import assert_alive
from .harness import classify_duplicates
from .harness import Harness
from .harness import plain_jobs
from .harness import sized
from .harness import stop
from .harness import timeline
from .harness import verdict
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

WORKERS = 3
VISIBILITY_TIMEOUT = 6


@pytest.mark.timeout(900)
def test_throttling_storms_and_latency(
    harness: Harness, proxy: FaultProxy, report: Report
) -> None:
    rng = random.Random(4)
    queue = harness.queue("throttle", visibility_timeout=VISIBILITY_TIMEOUT)
    queues = {"default": queue}
    count = sized(40, 150)
    jobs = plain_jobs("throttle", count, (1500, 9000), rng)
    workers = [harness.start_worker(queues, concurrency=4) for _ in range(WORKERS)]
    started = time.monotonic()
    proxy.add(Rule(Fault.DELAY, probability=0.4, delay=(0.1, 1.5)))
    proxy.add(Rule(Fault.SLOW_RESPONSE, probability=0.3, delay=(0.1, 1.0)))
    harness.send(queue.url, jobs)

    storms = 0
    storm = (
        Rule(Fault.THROTTLE, probability=0.2),
        Rule(Fault.REQUEST_THROTTLED, probability=0.1),
    )

    def done() -> bool:
        return {run.id for run in harness.runs() if run.ev == "done"} >= {
            job.id for job in jobs
        }

    deadline = time.monotonic() + 600
    while not done() and time.monotonic() < deadline:
        with proxy.rules(*storm):
            storms += 1
            time.sleep(rng.uniform(3, 8))  # the storm's length
        assert_alive(workers)
        time.sleep(rng.uniform(2, 6))  # the calm between storms
    proxy.clear()
    harness.wait_until_settled(
        queue.url, timeout=120, check=lambda: assert_alive(workers)
    )
    assert stop(workers) == [0] * WORKERS
    left = harness.drain(queue.url)
    dead = harness.drain(queue.dlq_url)
    runs = harness.runs()
    result = verdict(jobs, runs, left, dead)
    explained, unexplained = classify_duplicates(
        result.duplicate_ids, runs, workers, proxy.journal, VISIBILITY_TIMEOUT
    )
    counts = proxy.snapshot()
    figures: dict[str, t.Any] = {"storms": storms, **proxy.injected()}
    report(
        "d: throttling storms and latency",
        server=harness.server.kind,
        faults=figures,
        heartbeat_calls=sum(
            n
            for (action, _), n in counts.items()
            if "ChangeMessageVisibility" in action
        ),
        duplicates_explained_by_faults=len(explained),
        duplicates_caused_by_worker=len(unexplained),
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert not result.lost, f"lost jobs: {result.lost}"
    assert not unexplained, "the worker itself ran these twice:\n" + "\n\n".join(
        f"{job}:\n{timeline(job, runs, workers, proxy.journal)}" for job in unexplained
    )
