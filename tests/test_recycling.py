"""The recycling limits of ``flask sqs-worker`` (``--max-jobs``, ``--max-memory-mb``,
``--max-age``), with an injected clock and RSS reader."""

from __future__ import annotations

import pytest
import structlog
from flask_sqs_jobs.commands._recycling import RecycleLimits
from flask_sqs_jobs.commands._recycling import Recycler
from flask_sqs_jobs.commands._recycling import rss_mb
from flask_sqs_jobs.engine.model import Job


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def job() -> Job:
    return Job(job_type="record", payload={}, queue="default")


def recycler(limits: RecycleLimits, rss: float = 50.0, jitter: float = 0.0) -> Recycler:
    return Recycler(limits, clock=clock, rss=lambda: rss, jitter=lambda: jitter)


clock = Clock()


@pytest.fixture(autouse=True)
def _reset_clock() -> None:
    clock.now = 1000.0


def test_max_jobs_stops_once_that_many_jobs_started_and_logs_why() -> None:
    stop = recycler(RecycleLimits(max_jobs=3))
    for _ in range(2):
        stop.job_started(job())
    assert not stop()

    stop.job_started(job())
    with structlog.testing.capture_logs() as logs:
        assert stop()
        assert stop(), "a reached limit stays reached"

    assert stop.reason == "max_jobs"
    recycled = [e for e in logs if e["event"] == "worker_recycled"]
    assert recycled == [
        {
            "event": "worker_recycled",
            "log_level": "info",
            "reason": "max_jobs",
            "jobs": 3,
            "max_jobs": 3,
        }
    ]


def test_max_memory_stops_only_above_the_limit() -> None:
    assert not recycler(RecycleLimits(max_memory_mb=200), rss=200.0)()

    stop = recycler(RecycleLimits(max_memory_mb=200), rss=200.5)
    assert stop()
    assert stop.reason == "max_memory"


def test_max_age_stops_after_that_long() -> None:
    stop = recycler(RecycleLimits(max_age=3600))
    clock.now += 3599
    assert not stop()

    clock.now += 1
    assert stop()
    assert stop.reason == "max_age"


@pytest.mark.parametrize(("jitter", "age"), [(-1.0, 3240.0), (1.0, 3960.0)])
def test_max_age_is_jittered_by_up_to_ten_percent(jitter: float, age: float) -> None:
    stop = recycler(RecycleLimits(max_age=3600), jitter=jitter)
    assert stop.max_age == pytest.approx(age)
    clock.now += age - 1
    assert not stop()
    clock.now += 1.001
    assert stop()


def test_the_default_jitter_stays_within_ten_percent() -> None:
    ages = [Recycler(RecycleLimits(max_age=100)).max_age for _ in range(200)]
    assert all(a is not None and 90 <= a <= 110 for a in ages)
    assert len(set(ages)) > 1, "every process would restart at the same moment"


def test_no_limits_never_stop() -> None:
    assert not RecycleLimits()
    stop = recycler(RecycleLimits(), rss=1e9)
    clock.now += 1e9
    assert not stop()
    assert stop.reason is None


def test_the_rss_reader_reports_this_process_in_mib() -> None:
    assert 1 < rss_mb() < 100_000


def test_the_rss_is_read_at_most_once_a_second() -> None:
    now = [0.0]
    reads: list[float] = []

    def rss() -> float:
        reads.append(now[0])
        return 100.0

    stop = Recycler(
        RecycleLimits(max_memory_mb=200),
        clock=lambda: now[0],
        rss=rss,
        jitter=lambda: 0,
    )
    for _ in range(20):
        assert not stop()
        now[0] += 0.25
    assert reads == [0.0, 1.0, 2.0, 3.0, 4.0]
