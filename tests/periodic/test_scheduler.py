"""The embedded scheduler's loop, with an injected clock and recorded claims."""

from __future__ import annotations

import datetime as dt
import threading
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.ops._metrics import PrometheusMetrics
from flask_sqs_jobs.periodic import _scheduler
from flask_sqs_jobs.periodic._schedule import Schedule
from flask_sqs_jobs.periodic._scheduler import Scheduler

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 2, 59, 30, tzinfo=UTC)


class RecordedClaims:
    """Claims that fire every tick given, remembering them."""

    def __init__(self, last: dt.datetime | None = None) -> None:
        self.fired: list[tuple[str, dt.datetime]] = []
        self.last = last
        self.event = threading.Event()

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        self.fired.append((schedule.name, tick))
        self.event.set()
        return schedule.tick_job_id(tick)

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        return self.last

    def recover(self, now: float) -> float | None:
        return None


def schedule(cron: str = "0 * * * *", *, catch_up: bool = False) -> Schedule:
    return SQSJobs().schedule("hourly", cron=cron, job_type="report", catch_up=catch_up)


def test_each_tick_fires_once_and_the_wait_is_until_the_next_tick() -> None:
    claims = RecordedClaims()
    scheduler = Scheduler([schedule()], claims)
    scheduler.prime(T0)
    assert scheduler.run_due(T0) == 30.0  # until 03:00:00, no polling
    assert claims.fired == []
    three = dt.datetime(2026, 6, 1, 3, tzinfo=UTC)
    assert scheduler.run_due(three) == 300.0  # the cap; the next tick is 04:00
    assert claims.fired == [("hourly", three)]
    scheduler.run_due(three + dt.timedelta(seconds=1))
    assert claims.fired == [("hourly", three)]


def test_the_wait_is_capped_so_a_changed_wall_clock_is_noticed() -> None:
    scheduler = Scheduler([schedule("0 3 * * *")], RecordedClaims())
    scheduler.prime(T0 + dt.timedelta(minutes=1))
    assert scheduler.run_due(T0 + dt.timedelta(minutes=1)) == 300.0


def test_ticks_missed_while_the_worker_slept_are_skipped() -> None:
    claims = RecordedClaims()
    scheduler = Scheduler([schedule()], claims)
    scheduler.prime(T0)
    late = dt.datetime(2026, 6, 1, 6, 10, tzinfo=UTC)
    scheduler.run_due(late)
    scheduler.run_due(late)
    # The due 03:00 tick fires (late); 04:00-06:00 are skipped; 07:00 is next.
    assert claims.fired == [("hourly", dt.datetime(2026, 6, 1, 3, tzinfo=UTC))]
    assert scheduler.run_due(late) == 300.0


def test_without_catch_up_a_tick_missed_before_start_is_skipped() -> None:
    claims = RecordedClaims(last=dt.datetime(2026, 6, 1, 0, tzinfo=UTC))
    Scheduler([schedule()], claims).prime(T0)
    assert claims.fired == []


def test_with_catch_up_only_the_latest_missed_tick_runs_at_start() -> None:
    claims = RecordedClaims(last=dt.datetime(2026, 5, 31, 20, tzinfo=UTC))
    Scheduler([schedule(catch_up=True)], claims).prime(T0)
    assert claims.fired == [("hourly", dt.datetime(2026, 6, 1, 2, tzinfo=UTC))]


def test_catch_up_runs_nothing_when_the_latest_tick_already_ran() -> None:
    claims = RecordedClaims(last=dt.datetime(2026, 6, 1, 2, tzinfo=UTC))
    Scheduler([schedule(catch_up=True)], claims).prime(T0)
    assert claims.fired == []


def test_the_thread_sleeps_until_the_tick_then_fires_it() -> None:
    real = dt.datetime.now(UTC)
    boundary = real.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    offset = boundary - real - dt.timedelta(seconds=0.3)  # the tick is 0.3 s away
    claims = RecordedClaims()
    scheduler = Scheduler(
        [schedule("* * * * *")], claims, clock=lambda: dt.datetime.now(UTC) + offset
    )
    scheduler.start()
    try:
        assert claims.event.wait(10)
    finally:
        scheduler.stop()
    assert claims.fired == [("hourly", boundary)]


def test_a_fired_tick_is_logged_and_counted(log_events: list[dict[str, t.Any]]) -> None:
    metrics = PrometheusMetrics()
    scheduler = Scheduler([schedule()], RecordedClaims(), hooks=metrics)
    scheduler.prime(T0)
    scheduler.run_due(dt.datetime(2026, 6, 1, 3, tzinfo=UTC))
    fired = [e for e in log_events if e["event"] == "schedule_fired"]
    assert fired == [
        {
            "event": "schedule_fired",
            "log_level": "info",
            "schedule": "hourly",
            "tick": "2026-06-01T03:00:00Z",
            "job_id": "hourly:2026-06-01T03:00:00Z",
        }
    ]
    text = metrics.render()[0].decode()
    assert 'sqs_jobs_schedule_ticks_total{schedule="hourly"} 1.0' in text


def test_a_failing_claim_is_logged_and_the_next_tick_still_runs(
    log_events: list[dict[str, t.Any]],
) -> None:
    class Failing(RecordedClaims):
        def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
            super().fire(schedule, tick)
            raise ConnectionError("database down")

    claims = Failing()
    scheduler = Scheduler([schedule()], claims)
    scheduler.prime(T0)
    scheduler.run_due(dt.datetime(2026, 6, 1, 3, tzinfo=UTC))
    scheduler.run_due(dt.datetime(2026, 6, 1, 4, tzinfo=UTC))
    assert [tick.hour for _, tick in claims.fired] == [3, 4]
    assert [e["event"] for e in log_events].count("schedule_fire_failed") == 2


@pytest.mark.parametrize("catch_up", [False, True])
def test_prime_logs_the_next_tick_of_every_schedule(
    catch_up: bool, log_events: list[dict[str, t.Any]]
) -> None:
    Scheduler([schedule(catch_up=catch_up)], RecordedClaims()).prime(T0)
    started = [e for e in log_events if e["event"] == "scheduler_started"]
    assert started[0]["schedules"] == {"hourly": "2026-06-01T03:00:00Z"}


def test_a_tick_whose_claim_failed_is_tried_again_until_the_next_tick(
    log_events: list[dict[str, t.Any]],
) -> None:
    """The database restarting at the tick: the tick still fires, once."""

    class Restarting(RecordedClaims):
        failures = 2

        def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the database system is shutting down")
            return super().fire(schedule, tick)

    claims = Restarting()
    scheduler = Scheduler([schedule()], claims)
    scheduler.prime(T0)
    three = dt.datetime(2026, 6, 1, 3, tzinfo=UTC)
    assert scheduler.run_due(three) == _scheduler.FIRE_RETRY_SECONDS
    later = three + dt.timedelta(seconds=_scheduler.FIRE_RETRY_SECONDS)
    assert scheduler.run_due(later) == _scheduler.FIRE_RETRY_SECONDS
    assert claims.fired == []
    scheduler.run_due(later + dt.timedelta(seconds=_scheduler.FIRE_RETRY_SECONDS))
    assert claims.fired == [("hourly", three)]
    scheduler.run_due(three + dt.timedelta(minutes=5))
    assert claims.fired == [("hourly", three)]
    failed = [e for e in log_events if e["event"] == "schedule_fire_failed"]
    assert [e["retry_in"] for e in failed] == [_scheduler.FIRE_RETRY_SECONDS] * 2
