"""The jobs page's searches on a large table: each from an index, in a bounded read.

``python -m bench.job_search [--records N]`` fills a SQLite file and a PostgreSQL
database (a cluster started as the tests start it, ``tests/postgres.py``) with
``N`` records (20 job types, one failure in 50, each tagged with one of 5,000
customers), then times each search the page makes, best of 5, against a
read by primary key (``get``) in the same run, counts the statements each
sends, and prints a Markdown table. Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import typing as t
from pathlib import Path

import sqlalchemy as sa
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model import job_search
from flask_sqs_jobs.store.sql._tables import job_tags
from flask_sqs_jobs.store.sql._tables import jobs

from .chart_counts import _best
from .records import postgres

CUSTOMERS = 5000
SEARCHES: dict[str, dict[str, t.Any]] = {
    "tag": {"tag": "customer:42"},
    "tag + failed": {"tag": "customer:42", "status": ("failed", "dead_lettered")},
    "job type": {"job_type": "type-7"},
    "job type + failed": {"job_type": "type-7", "status": "failed"},
    "failed": {"status": ("failed", "dead_lettered")},
    "last hour": {"since": None},
}


def _fill(store: SQLAlchemyStore, count: int, now: dt.datetime) -> None:
    store.create_tables()
    chunk = 20_000
    with store.engine.begin() as connection:
        for start in range(0, count, chunk):
            rows, tags = [], []
            for i in range(start, min(count, start + chunk)):
                at = now - dt.timedelta(seconds=(count - i) * 604800 / count)
                rows.append(
                    {
                        "job_id": f"j{i}",
                        "job_type": f"type-{i % 20}",
                        "queue": "default",
                        "status": "failed" if i % 50 == 0 else "succeeded",
                        "attempts": 1,
                        "finished_at": at,
                        "updated_at": at,
                    }
                )
                tags.append(
                    {
                        "job_id": f"j{i}",
                        "tag": f"customer:{i % CUSTOMERS}",
                        "updated_at": at,
                    }
                )
            connection.execute(jobs.insert(), rows)
            connection.execute(job_tags.insert(), tags)
        if store.engine.dialect.name == "postgresql":
            connection.execute(sa.text("ANALYZE sqs_jobs_jobs"))
            connection.execute(sa.text("ANALYZE sqs_jobs_job_tags"))


def measure(url: str, count: int) -> dict[str, tuple[float, int, int]]:
    """Per read: its best seconds, the statements it sent, the records it found."""
    store = SQLAlchemyStore(url)
    now = dt.datetime.now(dt.UTC)
    _fill(store, count, now)
    records = store.job_records()
    statements = 0

    def counted(*args: object) -> None:
        nonlocal statements
        statements += 1

    sa.event.listen(store.engine, "before_cursor_execute", counted)
    results: dict[str, tuple[float, int, int]] = {}
    reads: dict[str, t.Callable[[], list[t.Any]]] = {
        "get (baseline)": lambda: [records.get(f"j{count // 2}")],
    }
    for label, filters in SEARCHES.items():
        if "since" in filters:
            filters = {"since": now - dt.timedelta(hours=1)}
        search = job_search(**filters, limit=50)
        reads[label] = lambda search=search: records.find(search)
    for label, read in reads.items():
        read()  # warm
        statements = 0
        found = len(read())
        sent = statements
        results[label] = (_best(read), sent, found)
    sa.event.remove(store.engine, "before_cursor_execute", counted)
    store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with postgres() as pg, tempfile.TemporaryDirectory() as folder:
        sqlite = f"sqlite:///{Path(folder) / 'jobs.db'}"
        for label, url in (("SQLite", sqlite), ("PostgreSQL", pg)):
            results = measure(url, args.records)
            base = results["get (baseline)"][0]
            print(f"\n{label}, {args.records:,} records\n")
            print("| read | best of 5 | x get | statements | found |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for read, (seconds, sent, found) in results.items():
                print(
                    f"| {read} | {seconds * 1000:.2f} ms | {seconds / base:.1f} |"
                    f" {sent} | {found} |"
                )


if __name__ == "__main__":
    main()
