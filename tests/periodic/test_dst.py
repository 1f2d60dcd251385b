"""Daylight saving: a 02:30 (and 01:30) job across both changes, in two zones.

cronsim's rules, which the scheduler follows: a wall-clock time that does not
exist on the spring-forward day runs once, at the first minute after the gap
(03:00); a time that happens twice on the fall-back day runs once, at its
first occurrence (summer time).
"""

from __future__ import annotations

import datetime as dt

import pytest
from flask_sqs_jobs.periodic._cron import CronExpression

UTC = dt.UTC


def ticks(cron: str, zone: str, start: dt.datetime, count: int) -> list[dt.datetime]:
    return CronExpression(cron, zone).next_times(count, start)


@pytest.mark.parametrize(
    ("zone", "day_before", "shifted"),
    [
        # 2026-03-29 02:00 CET -> 03:00 CEST: 02:30 does not exist.
        ("Europe/Berlin", dt.datetime(2026, 3, 28, 12, tzinfo=UTC), "2026-03-29 01:00"),
        # 2026-03-08 02:00 EST -> 03:00 EDT.
        (
            "America/New_York",
            dt.datetime(2026, 3, 7, 12, tzinfo=UTC),
            "2026-03-08 07:00",
        ),
    ],
)
def test_a_nonexistent_0230_runs_once_at_0300_on_the_spring_forward_day(
    zone: str, day_before: dt.datetime, shifted: str
) -> None:
    times = ticks("30 2 * * *", zone, day_before, 3)
    assert f"{times[0]:%Y-%m-%d %H:%M}" == shifted
    local = [t.astimezone(CronExpression("0 0 * * *", zone).zone) for t in times]
    assert [f"{t:%H:%M}" for t in local] == ["03:00", "02:30", "02:30"]
    assert len({t.date() for t in local}) == 3  # once a day, every day


@pytest.mark.parametrize(
    ("zone", "cron", "day_before", "first"),
    [
        # 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 happens twice.
        (
            "Europe/Berlin",
            "30 2 * * *",
            dt.datetime(2026, 10, 24, 12, tzinfo=UTC),
            dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        ),
        # 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice.
        (
            "America/New_York",
            "30 1 * * *",
            dt.datetime(2026, 10, 31, 12, tzinfo=UTC),
            dt.datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        ),
    ],
)
def test_an_ambiguous_time_runs_once_at_its_first_occurrence_on_the_fall_back_day(
    zone: str, cron: str, day_before: dt.datetime, first: dt.datetime
) -> None:
    times = ticks(cron, zone, day_before, 3)
    assert times[0] == first
    # The next run is the next day's, not the repeated hour an hour later.
    assert times[1] - times[0] == dt.timedelta(hours=25)
    assert times[2] - times[1] == dt.timedelta(hours=24)


def test_new_york_0230_on_the_fall_back_day_is_unambiguous_and_runs_once() -> None:
    times = ticks(
        "30 2 * * *", "America/New_York", dt.datetime(2026, 10, 31, 12, tzinfo=UTC), 2
    )
    assert times == [
        dt.datetime(2026, 11, 1, 7, 30, tzinfo=UTC),
        dt.datetime(2026, 11, 2, 7, 30, tzinfo=UTC),
    ]


def test_the_latest_tick_at_or_before_a_moment_agrees_with_the_next_one() -> None:
    cron = CronExpression("30 2 * * *", "Europe/Berlin")
    tick = dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert cron.latest_at_or_before(tick) == tick
    assert cron.latest_at_or_before(tick + dt.timedelta(hours=5)) == tick
    assert cron.latest_at_or_before(tick - dt.timedelta(seconds=1)) == dt.datetime(
        2026, 10, 24, 0, 30, tzinfo=UTC
    )
