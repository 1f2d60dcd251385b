"""A worker's cancel watch: one batched tombstone read for all its running jobs."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import threading
import time

from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine.flow import CancelWatch


class CountingTombstones:
    """Tombstones in memory that note every read."""

    def __init__(self) -> None:
        self.tombstoned: set[str] = set()
        self.reads: list[list[str]] = []
        self.read = threading.Event()

    def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
        self.reads.append(sorted(job_ids))
        self.read.set()
        return self.tombstoned & set(job_ids)


def _job(n: int) -> Job:
    return Job("report", {}, queue="default", job_id=f"job-{n}")


def _wait(predicate: cabc.Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_running_jobs_are_read_together_and_a_cancelled_one_is_asked_to_stop() -> None:
    tombstones = CountingTombstones()
    watch = CancelWatch(tombstones, lambda exc, queue: None)
    jobs = [_job(n) for n in range(20)]
    with contextlib.ExitStack() as running:
        for job in jobs:
            running.enter_context(watch.watching(job, 0.05))
        tombstones.tombstoned.add("job-3")
        _wait(lambda: jobs[3].cancel_requested.is_set())
        reads = list(tombstones.reads)

    assert reads, "no read"
    everyone = sorted(job.job_id or "" for job in jobs)
    assert reads[-1] == everyone  # one read for all twenty jobs
    assert all(len(ids) == 20 for ids in reads[1:])
    assert jobs[3].abort_requested.is_set()
    assert not any(job.cancel_requested.is_set() for job in jobs if job is not jobs[3])


def test_the_watch_ends_when_no_job_runs_and_a_failing_store_is_reported() -> None:
    errors: list[BaseException] = []

    class Broken(CountingTombstones):
        def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
            super().cancelled(job_ids)
            raise ConnectionError("store down")

    tombstones = Broken()
    watch = CancelWatch(tombstones, lambda exc, queue: errors.append(exc))
    job = _job(1)
    assert watch.arrived(job) is False  # the job runs, the error is reported
    with watch.watching(job, 0.02):
        _wait(lambda: len(tombstones.reads) >= 3)
    assert not job.cancel_requested.is_set()
    assert all(isinstance(e, ConnectionError) for e in errors)
    _wait(
        lambda: (
            not any(t.name == "sqs-jobs-cancel-watch" for t in threading.enumerate())
        )
    )
    assert watch._thread is None
