"""(b) SIGTERM during jobs, and a second SIGTERM: both paths keep their promises.

Graceful (one SIGTERM): the running jobs finish and their messages are
deleted; nothing starts after the stop; every other message the worker held is
visible again at once (the queue's visibility timeout is 60 s, so a message
not released would stay hidden). Forced (a second SIGTERM): the process exits
at once with 128 + 15 and the messages of the abandoned jobs are visible again
at once.
"""

from __future__ import annotations

import random
import signal
import time

import pytest

from tests.integration.helpers import log_time

from .conftest import Report
from .harness import Harness
from .harness import plain_jobs
from .harness import sized
from .harness import stop
from .harness import verdict

VISIBILITY_TIMEOUT = 60
CONCURRENCY = 4


@pytest.mark.timeout(900)
def test_graceful_and_forced_stops_keep_their_promises(
    harness: Harness, report: Report
) -> None:
    rng = random.Random(2)
    queue = harness.queue("sigterm", visibility_timeout=VISIBILITY_TIMEOUT)
    queues = {"default": queue}
    rounds = sized(4, 12)
    plan = ["graceful", "forced"] * (rounds // 2)
    rng.shuffle(plan)
    started = time.monotonic()
    jobs = []
    signals = {"sigterm_graceful": 0, "sigterm_forced": 0}
    abandoned = 0
    for index, path in enumerate(plan):
        ms = (200, 1000) if path == "graceful" else (1500, 4000)
        batch = plain_jobs(f"term{index}", sized(16, 24), ms, rng)
        jobs += batch
        harness.send(queue.url, batch)
        worker = harness.start_worker(queues, concurrency=CONCURRENCY)
        worker.wait_for("job_started", timeout=60, count=rng.randint(1, 10))
        worker.send_signal(signal.SIGTERM)
        stopping = worker.wait_for("worker_stopping")
        if path == "graceful":
            signals["sigterm_graceful"] += 1
            assert worker.wait(60) == 0
        else:
            signals["sigterm_forced"] += 2
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(10) == 128 + signal.SIGTERM
        visible, in_flight, _ = harness.counts(queue.url)
        assert in_flight == 0, f"{in_flight} messages stay hidden after a {path} stop"

        runs = [run for run in harness.runs() if run.pid == worker.pid]
        began = {run.id for run in runs if run.ev == "start"}
        finished = {run.id for run in runs if run.ev == "done"}
        all_done = {run.id for run in harness.runs() if run.ev == "done"}
        assert visible == len({job.id for job in jobs} - all_done)
        if path == "graceful":
            assert began == finished, "a running job did not finish after SIGTERM"
            stop_at = log_time(stopping)
            late = [run for run in runs if run.ev == "start" and run.t > stop_at]
            assert not late, f"jobs started after the stop request: {late}"
        else:
            abandoned += len(began - finished)
        worker.close()

    # One last worker runs what is left; nothing may be missing.
    last = harness.start_worker(queues, concurrency=CONCURRENCY)
    harness.wait_until_settled(queue.url, timeout=300)
    assert stop([last]) == [0]
    left = harness.drain(queue.url)
    dead = harness.drain(queue.dlq_url)
    result = verdict(jobs, harness.runs(), left, dead)
    report(
        "b: SIGTERM, graceful and forced",
        server=harness.server.kind,
        faults={**signals, "jobs_abandoned": abandoned},
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert not result.lost, f"lost jobs: {result.lost}"
    assert result.duplicates == 0, f"ran twice: {result.duplicate_ids}"
