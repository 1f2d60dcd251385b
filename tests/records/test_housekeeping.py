"""Housekeeping at fleet size: records pruned in batches, by one worker at a time."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import pathlib
import typing as t

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records import _housekeeping
from flask_sqs_jobs.store.records._housekeeping import Housekeeping

NOW = dt.datetime.now(dt.UTC)
OLD = NOW - dt.timedelta(days=8)


def _write_jobs(store: JobStore, count: int, at: dt.datetime, prefix: str) -> None:
    store.job_records().write(
        [
            JobEvent(
                f"{prefix}-{i}",
                "send",
                "default",
                "succeeded",
                1,
                at + dt.timedelta(microseconds=i),
                finished_at=at,
                tags=("tenant-1",),
            )
            for i in range(count)
        ]
    )


def _rows(store: SQLAlchemyStore, table: str) -> int:
    with store.engine.connect() as connection:
        count = connection.execute(sa.text(f"SELECT count(*) FROM {table}"))
        return int(count.scalar_one())


def test_prune_with_a_limit_deletes_the_oldest_records_and_their_tags(
    sql_store: SQLAlchemyStore,
) -> None:
    _write_jobs(sql_store, 30, OLD, "old")
    _write_jobs(sql_store, 5, NOW, "new")
    records = sql_store.job_records()
    cutoff = NOW - dt.timedelta(days=7)

    assert records.prune(cutoff, 20) == 20
    assert records.get("old-19") is None
    assert records.get("old-20") is not None
    assert records.prune(cutoff) == 10
    assert records.prune(cutoff) == 0

    assert _rows(sql_store, "sqs_jobs_jobs") == 5
    assert _rows(sql_store, "sqs_jobs_job_tags") == 5
    # The counts of the pruned minutes went with them; the recent ones stay.
    assert _total(records.finished_per_minute(OLD)) == 5


def _total(counts: cabc.Iterable[t.Any]) -> int:
    return sum(count.count for count in counts)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        # Each reading moves time on, so a step's time budget runs out.
        self.now += 0.5
        return self.now


def _make(store: SQLAlchemyStore, holder: str, clock: FakeClock) -> Housekeeping:
    def attempt(action: str, func: cabc.Callable[..., object], *args: object) -> object:
        return func(*args)

    return Housekeeping(
        store.worker_registry(),
        holder=holder,
        attempt=attempt,
        records=store.job_records(),
        limits=store.limits(),
        retention=dt.timedelta(days=7),
        lost_retention=dt.timedelta(days=1),
        every_seconds=3600,
        clock=clock,
    )


def _two_workers(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[FakeClock, Housekeeping, Housekeeping]:
    """Two workers' housekeeping over 45 old records, 10 per prune, 2 per step."""
    monkeypatch.setattr(_housekeeping, "PRUNE_LIMIT", 10)
    monkeypatch.setattr(_housekeeping, "STEP_SECONDS", 1.0)
    _write_jobs(store, 45, OLD, "old")
    clock = FakeClock()
    return clock, _make(store, "worker-a", clock), _make(store, "worker-b", clock)


def _steps_until_done(housekeeping: Housekeeping) -> int:
    """Step ``housekeeping`` until its pruning ends; return how many steps it took."""
    steps = 0
    while housekeeping.busy:
        housekeeping.step(NOW)
        steps += 1
        assert steps < 20, "the pruning did not end"
    return steps


def test_one_process_prunes_in_steps_while_the_others_skip(
    sql_store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, first, second = _two_workers(sql_store, monkeypatch)

    first.step(NOW)
    # One step deleted a bounded number of rows, and the pruning goes on.
    assert first.busy
    left = _rows(sql_store, "sqs_jobs_jobs")
    assert 0 < left < 45
    second.step(NOW)
    assert not second.busy
    assert _rows(sql_store, "sqs_jobs_jobs") == left

    assert _steps_until_done(first) > 0
    assert _rows(sql_store, "sqs_jobs_jobs") == 0

    # Done, the first keeps the lease for the interval: the second still skips.
    _write_jobs(sql_store, 3, OLD, "later")
    clock.now += 400
    second.step(NOW)
    assert not second.busy
    assert _rows(sql_store, "sqs_jobs_jobs") == 3


def test_a_stopped_pruner_hands_its_lease_over(
    sql_store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, first, second = _two_workers(sql_store, monkeypatch)
    first.step(NOW)
    assert first.busy

    first.stop()
    clock.now += 400  # the second's next look at the lease
    second.step(NOW)
    _steps_until_done(second)

    assert _rows(sql_store, "sqs_jobs_jobs") == 0


def test_without_a_readable_lease_every_process_prunes(
    tmp_path: pathlib.Path,
) -> None:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    _write_jobs(store, 5, OLD, "old")
    with store.engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE sqs_jobs_limit_permits"))
    housekeeping = _make(store, "worker-a", FakeClock())

    housekeeping.step(NOW)

    assert not housekeeping.busy
    assert _rows(store, "sqs_jobs_jobs") == 0
    store.close()
