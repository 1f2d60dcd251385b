"""The dashboard's charts: one grouped count against reading the newest records.

``python -m bench.chart_counts [--week N] [--hour M]`` fills a SQLite file and
a PostgreSQL database (a cluster started as the tests start it,
``tests/postgres.py``) with ``N`` records finished over the last week and
``M`` in the last hour, then times ``finished_per_minute(an hour ago)`` and
``recent(5000)`` (what the charts read before, which saw at most 5,000 of
the hour's jobs), best of 5, and prints a Markdown table.
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
from flask_sqs_jobs.store.sql._tables import jobs

from .records import postgres

#: The records the charts used to read.
OLD_LIMIT = 5000


def _fill(store: SQLAlchemyStore, week: int, hour: int, now: dt.datetime) -> None:
    store.create_tables()
    rows = []
    for i in range(week):
        at = now - dt.timedelta(hours=1, seconds=i * 7 * 86400 / week)
        rows.append(_row(f"w{i}", "succeeded", at))
    for i in range(hour):
        at = now - dt.timedelta(seconds=i * 3540 / hour)
        rows.append(_row(f"h{i}", "failed" if i % 10 == 0 else "succeeded", at))
    with store.engine.begin() as connection:
        connection.execute(jobs.insert(), rows)
        if store.engine.dialect.name == "postgresql":
            connection.execute(sa.text("ANALYZE sqs_jobs_jobs"))


def _row(job_id: str, status: str, at: dt.datetime) -> dict[str, t.Any]:
    return {
        "job_id": job_id,
        "job_type": "send",
        "queue": "default",
        "status": status,
        "attempts": 1,
        "finished_at": at,
        "updated_at": at,
    }


def _best(call: t.Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(url: str, week: int, hour: int) -> tuple[float, float, int]:
    """Seconds of the old and the new read, and how many jobs the new one counted."""
    store = SQLAlchemyStore(url)
    now = dt.datetime.now(dt.UTC)
    _fill(store, week, hour, now)
    records = store.job_records()
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=59)
    old = _best(lambda: records.recent(OLD_LIMIT))
    new = _best(lambda: records.finished_per_minute(since))
    counted = sum(c.count for c in records.finished_per_minute(since))
    store.close()
    return old, new, counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--week", type=int, default=100_000, help="older records")
    parser.add_argument("--hour", type=int, default=6_000, help="last hour's records")
    args = parser.parse_args()
    print("| database | recent(5000) | finished_per_minute | ratio | jobs counted |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with postgres() as pg, tempfile.TemporaryDirectory() as folder:
        sqlite = f"sqlite:///{Path(folder) / 'jobs.db'}"
        for label, url in (("SQLite", sqlite), ("PostgreSQL", pg)):
            old, new, counted = measure(url, args.week, args.hour)
            print(
                f"| {label} | {old * 1000:.1f} ms | {new * 1000:.1f} ms |"
                f" {old / new:.1f} x | {counted} of {args.hour} |"
            )


if __name__ == "__main__":
    main()
