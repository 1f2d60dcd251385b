"""The dashboard's charts: the per-minute counters against a count of the records.

``python -m bench.chart_counts [--hour M ...]`` writes, through the record
writer's own ``write`` (so the counters are kept as a worker keeps them),
``M`` jobs finished over the last hour, into a SQLite file and a PostgreSQL
database (a cluster started as the tests start it, ``tests/postgres.py``).
It then times the chart's read, ``finished_per_minute(an hour ago)``, which
reads ``sqs_jobs_minute_counts``, against the ``GROUP BY`` over the hour's
records it replaced, best of 5, and counts the rows each reads. A table per
hour size shows what grows with the number of jobs and what does not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
import typing as t
from pathlib import Path

import sqlalchemy as sa
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.sql._tables import jobs
from flask_sqs_jobs.store.sql._tables import minute_counts

from .records import postgres

#: Events per ``write`` call, as the record writer batches them.
BATCH = 200


def _fill(store: SQLAlchemyStore, hour: int, now: dt.datetime) -> None:
    store.create_tables()
    records = store.job_records()
    events = []
    for i in range(hour):
        at = now - dt.timedelta(seconds=i * 3540 / hour)
        status = "failed" if i % 10 == 0 else "succeeded"
        queue = "critical" if i % 4 == 0 else "default"
        events.append(JobEvent(f"h{i}", "send", queue, status, 1, at, finished_at=at))
        if len(events) == BATCH:
            records.write(events)
            events = []
    records.write(events)
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as connection:
            connection.execute(sa.text("ANALYZE"))


def _best(call: t.Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def _group_by_records(store: SQLAlchemyStore, since: dt.datetime) -> int:
    """The read the charts made before the counters: a count of the records.
    Returns the rows it read (the hour's records)."""
    query = (
        sa.select(jobs.c.queue, jobs.c.status, sa.func.count())
        .where(jobs.c.updated_at >= since, jobs.c.finished_at >= since)
        .group_by(jobs.c.queue, jobs.c.status)
    )
    with store.engine.connect() as connection:
        return sum(count for _, _, count in connection.execute(query))


def _counter_rows(store: SQLAlchemyStore, since: dt.datetime) -> int:
    query = sa.select(sa.func.count()).where(minute_counts.c.minute >= since)
    with store.engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


def measure(url: str, hour: int) -> dict[str, float]:
    """The old and the new read's seconds and rows read, and the jobs counted."""
    store = SQLAlchemyStore(url)
    now = dt.datetime.now(dt.UTC)
    _fill(store, hour, now)
    records = store.job_records()
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=59)
    figures = {
        "old": _best(lambda: _group_by_records(store, since)),
        "new": _best(lambda: records.finished_per_minute(since)),
        "old_rows": _group_by_records(store, since),
        "new_rows": _counter_rows(store, since),
        "counted": sum(c.count for c in records.finished_per_minute(since)),
    }
    store.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hour",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="jobs finished in the last hour (one run per value)",
    )
    args = parser.parse_args()
    print(
        "| database | jobs in the hour | GROUP BY records | rows read"
        " | counters | rows read | ratio | jobs counted |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for hour in args.hour:
        with postgres() as pg, tempfile.TemporaryDirectory() as folder:
            sqlite = f"sqlite:///{Path(folder) / 'jobs.db'}"
            for label, url in (("SQLite", sqlite), ("PostgreSQL", pg)):
                got = measure(url, hour)
                print(
                    f"| {label} | {hour:,} | {got['old'] * 1000:.1f} ms"
                    f" | {got['old_rows']:,.0f} | {got['new'] * 1000:.2f} ms"
                    f" | {got['new_rows']:,.0f} | {got['old'] / got['new']:.0f} x"
                    f" | {got['counted']:,.0f} of {hour:,} |"
                )


if __name__ == "__main__":
    main()
