"""Pruning a large expired backlog on PostgreSQL while records are written.

``python -m bench.pruning [--expired 1000000] [--seconds 20]`` starts a
PostgreSQL cluster (as the tests start one, ``tests/postgres.py``), loads
``--expired`` records older than the retention, then writes records as a
busy worker's writer does (batches of 200 finishing jobs, from 4 threads)
for ``--seconds`` without pruning, again while one housekeeping process
prunes in ``JobRecords.prune(limit=2000)`` calls, in steps and pauses of
2 s as the workers' lease holder does, and once more without. It prints the
writes' throughput in each phase (the ratio of pruning to the mean of the
others: target >= 0.90), the longest prune call (target <= 1 s) and the
rows pruned.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import threading
import time

import sqlalchemy as sa
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records._housekeeping import PRUNE_LIMIT
from flask_sqs_jobs.store.records._housekeeping import STEP_SECONDS
from flask_sqs_jobs.store.records._presence import PRUNE_PAUSE_SECONDS
from flask_sqs_jobs.store.sql._tables import jobs

from .records import postgres

#: Threads writing records at once (several worker processes' writers).
WRITERS = 4
#: Events per write, as the record writer batches them.
BATCH = 200


def _load(store: SQLAlchemyStore, expired: int) -> None:
    """``expired`` records last written eight days ago, in one COPY-sized go."""
    at = dt.datetime.now(dt.UTC) - dt.timedelta(days=8)
    with store.engine.begin() as connection:
        for start in range(0, expired, 50_000):
            connection.execute(
                jobs.insert(),
                [
                    {
                        "job_id": f"old-{i}",
                        "job_type": "send",
                        "queue": "default",
                        "status": "succeeded",
                        "attempts": 1,
                        "finished_at": at,
                        "updated_at": at + dt.timedelta(microseconds=i),
                    }
                    for i in range(start, min(expired, start + 50_000))
                ],
            )
        connection.execute(sa.text("ANALYZE sqs_jobs_jobs"))


def _write_for(store: SQLAlchemyStore, seconds: float, label: str) -> float:
    """Jobs recorded per second by :data:`WRITERS` threads for ``seconds``."""
    records = store.job_records()
    ids = itertools.count()
    done = [0] * WRITERS
    ends = time.monotonic() + seconds

    def write(slot: int) -> None:
        while time.monotonic() < ends:
            now = dt.datetime.now(dt.UTC)
            batch = [
                JobEvent(
                    f"{label}-{next(ids)}",
                    "send",
                    "default",
                    "succeeded",
                    1,
                    now,
                    started_at=now,
                    finished_at=now,
                )
                for _ in range(BATCH)
            ]
            records.write(batch)
            done[slot] += BATCH

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expired", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with postgres() as url:
        store = SQLAlchemyStore(url)
        store.create_tables()
        _load(store, args.expired)
        baseline = _write_for(store, args.seconds, "before")
        records = store.job_records()
        cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
        calls: list[float] = []
        stop = threading.Event()

        def prune() -> None:
            """As the lease holder's presence thread: steps of STEP_SECONDS of
            prune calls, PRUNE_PAUSE_SECONDS apart."""
            while not stop.is_set():
                ends = time.monotonic() + STEP_SECONDS
                while time.monotonic() < ends:
                    started = time.perf_counter()
                    deleted = records.prune(cutoff, PRUNE_LIMIT)
                    calls.append(time.perf_counter() - started)
                    if deleted < PRUNE_LIMIT:
                        return
                stop.wait(PRUNE_PAUSE_SECONDS)

        pruner = threading.Thread(target=prune)
        pruner.start()
        during = _write_for(store, args.seconds, "during")
        stop.set()
        pruner.join()
        # Again without pruning: a table grown by the phases before (and the
        # database's own upkeep) slows writes too, so both sides count it.
        after = _write_for(store, args.seconds, "after")
        with store.engine.connect() as connection:
            left = connection.execute(
                sa.select(sa.func.count()).where(jobs.c.updated_at < cutoff)
            ).scalar_one()
        store.close()
    pruned = args.expired - left
    print("| measure | value | target |")
    print("| --- | ---: | ---: |")
    without = (baseline + after) / 2
    print(f"| records written, no pruning, before | {baseline:,.0f} jobs/s | |")
    print(f"| records written while pruning | {during:,.0f} jobs/s | |")
    print(f"| records written, no pruning, after | {after:,.0f} jobs/s | |")
    print(f"| ratio, while pruning / without | {during / without:.2f} | >= 0.90 |")
    print(f"| prune calls ({PRUNE_LIMIT:,} rows each) | {len(calls):,} | |")
    print(f"| longest prune call | {max(calls) * 1000:.0f} ms | <= 1,000 ms |")
    print(f"| expired rows pruned in {args.seconds:.0f} s | {pruned:,} | |")


if __name__ == "__main__":
    main()
