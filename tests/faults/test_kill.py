"""(a) Workers SIGKILLed at random moments and restarted: no job is lost."""

from __future__ import annotations

import random
import signal
import time

import pytest

from .conftest import Report
from .harness import assert_alive
from .harness import Harness
from .harness import plain_jobs
from .harness import sized
from .harness import stop
from .harness import verdict

WORKERS = 3
VISIBILITY_TIMEOUT = 5


@pytest.mark.timeout(900)
def test_sigkill_and_restart_loses_no_job(harness: Harness, report: Report) -> None:
    rng = random.Random(1)
    count = sized(300, 1000)
    queue = harness.queue("kill", visibility_timeout=VISIBILITY_TIMEOUT)
    queues = {"default": queue}
    jobs = plain_jobs("kill", count, (50, 400), rng)
    started = time.monotonic()
    harness.send(queue.url, jobs)
    workers = [harness.start_worker(queues, concurrency=3) for _ in range(WORKERS)]

    kills = interrupted = 0
    max_kills = sized(8, 25)
    deadline = time.monotonic() + 600
    while kills < max_kills and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.5, 3.0))  # a random moment, not a synchronisation
        done = {run.id for run in harness.runs() if run.ev == "done"}
        if len(done) >= count:
            break
        victim = workers.pop(rng.randrange(len(workers)))
        assert_alive([victim, *workers])
        victim.send_signal(signal.SIGKILL)
        victim.close()
        kills += 1
        runs = [run for run in harness.runs() if run.pid == victim.pid]
        finished = {run.mid for run in runs if run.ev == "done"}
        interrupted += sum(
            1 for run in runs if run.ev == "start" and run.mid not in finished
        )
        workers.append(harness.start_worker(queues, concurrency=3))

    harness.wait_until_settled(
        queue.url, timeout=300, check=lambda: assert_alive(workers)
    )
    assert stop(workers) == [0] * len(workers)
    left = harness.drain(queue.url)
    dead = harness.drain(queue.dlq_url)
    result = verdict(jobs, harness.runs(), left, dead)
    report(
        "a: SIGKILL and restart",
        server=harness.server.kind,
        faults={"sigkill": kills, "runs_interrupted": interrupted},
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert kills >= min(max_kills, 3), "the jobs ran out before the kills"
    assert not result.lost, f"lost jobs: {result.lost}"
    assert not left
