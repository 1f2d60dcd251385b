"""Job records' cost: the same worker draining with records off and on, in one run.

``python -m bench.records [--jobs N] [--slow-jobs M] [--repeat R]`` starts
MiniStack (``bench.servers.ministack``) and a PostgreSQL cluster (as the tests
do, ``tests/postgres.py``), then drains pre-filled queues with the Flask
layer's worker (``jobs.create_worker``, 16 slots), each job in its own app
context as ``flask sqs-worker`` runs it:

- no-op jobs: records off, on SQLite, on PostgreSQL; the ratio is each rate
  over the records-off rate of the same run;
- 50 ms jobs: records on SQLite and on PostgreSQL, against the ideal
  (``jobs * 0.05 / 16`` seconds).

Jobs are enqueued through ``jobs.enqueue_many`` (so their ``queued`` records
exist); a drain lasts from the first handler start until every job ran and
its record writes are done. Prints a Markdown table (medians of ``--repeat``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import tempfile
import threading
import time
import typing as t
from collections.abc import Iterator
from pathlib import Path

import structlog

from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws

SLOTS = 16
SLOW_SECONDS = 0.05


class Counter:
    """Counts finished jobs; keeps the first start."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.lock = threading.Lock()
        self.done = 0
        self.first_start: float | None = None
        self.all_done = threading.Event()

    def started(self) -> None:
        with self.lock:
            if self.first_start is None:
                self.first_start = time.monotonic()

    def finished(self) -> None:
        with self.lock:
            self.done += 1
            if self.done == self.jobs:
                self.all_done.set()


def drain(endpoint: str, store_url: str | None, *, jobs: int, sleep: float) -> float:
    """Drain ``jobs`` jobs; return jobs per second."""
    from flask import Flask
    from flask_sqs_jobs import SQSJobs
    from flask_sqs_jobs.engine.ops._store_errors import store_error_counts
    from flask_sqs_jobs.store.records._recording import recorder_of

    sqs = sqs_client(endpoint)
    _, url = new_queue(sqs, "records")
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": url}},
        SQS_JOBS_ENDPOINT_URL=endpoint,
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_RECORD_JOBS=store_url is not None,
        SQS_JOBS_STORE_URL=store_url,
    )
    ext = SQSJobs(app, boto_client=sqs)
    counter = Counter(jobs)

    @ext.handler("work")
    def work(payload: dict[str, t.Any]) -> dict[str, int]:
        counter.started()
        if sleep:
            time.sleep(sleep)
        counter.finished()
        return {"n": payload["n"]}

    recorder = recorder_of(ext.parts(app).hooks)
    with app.app_context():
        if store_url is not None:
            ext.store(app).create_tables()
        ext.enqueue_many("default", [("work", {"n": i}) for i in range(jobs)])
        if recorder is not None:
            recorder.writer.flush(120)
    worker = ext.create_worker(app, concurrency=SLOTS, idle_wait_seconds=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    if not counter.all_done.wait(300):
        raise RuntimeError(f"only {counter.done}/{jobs} jobs ran")
    if recorder is not None and not recorder.writer.flush(120):
        raise RuntimeError("the record writes did not finish")
    finished = time.monotonic()
    failed = store_error_counts().get("job_records", 0)
    if failed:
        raise RuntimeError(f"{failed} record writes failed; see the log")
    worker.request_stop()
    thread.join(60)
    assert counter.first_start is not None
    if store_url is not None:
        ext.store(app).close()
    sqs.delete_queue(QueueUrl=url)
    return jobs / (finished - counter.first_start)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    from tests.postgres import fresh_database
    from tests.postgres import postgres_cluster

    with postgres_cluster() as server:
        yield fresh_database(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs a drain")
    parser.add_argument("--slow-jobs", type=int, default=1600, help="50 ms jobs")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    use_fake_aws()
    # INFO lines per job cost the same with records on and off; dropping them
    # makes the records' share of each job's cost larger, not smaller.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )
    with ministack() as server, postgres() as pg, tempfile.TemporaryDirectory() as d:
        sqlite = f"sqlite:///{Path(d) / 'jobs.db'}"
        stores = {"off": None, "SQLite": sqlite, "PostgreSQL": pg}
        noop: dict[str, list[float]] = {k: [] for k in stores}
        slow: dict[str, list[float]] = {"SQLite": [], "PostgreSQL": []}
        drain(server.endpoint, None, jobs=200, sleep=0)  # warm-up, not counted
        for _ in range(args.repeat):
            for label, url in stores.items():
                noop[label].append(drain(server.endpoint, url, jobs=args.jobs, sleep=0))
            for label in slow:
                slow[label].append(
                    drain(
                        server.endpoint,
                        stores[label],
                        jobs=args.slow_jobs,
                        sleep=SLOW_SECONDS,
                    )
                )
    off = statistics.median(noop["off"])
    ideal = SLOTS / SLOW_SECONDS
    print(f"| drain ({SLOTS} slots, {server.name}) | records | jobs/s | ratio |")
    print("| --- | --- | --- | --- |")
    for label, rates in noop.items():
        rate = statistics.median(rates)
        ratio = f"{rate / off:.2f} of off"
        print(f"| no-op, {args.jobs} jobs | {label} | {rate:.0f} | {ratio} |")
    for label, rates in slow.items():
        rate = statistics.median(rates)
        print(
            f"| 50 ms, {args.slow_jobs} jobs | {label} | {rate:.0f} |"
            f" {rate / ideal:.2f} of ideal ({ideal:.0f}) |"
        )


if __name__ == "__main__":
    main()
