"""Batches on PostgreSQL: what counting each child costs, against the same jobs without.

``python -m bench.workflows [--jobs N] [--concurrency C] [--repeat R]
[--sleep-ms MS]`` starts MiniStack (as ``python -m bench`` does) and a
throwaway PostgreSQL cluster (``tests/postgres.py``: needs PostgreSQL's
binaries), then, ``R`` times interleaved: writes ``N`` jobs (no-op, or
sleeping ``MS``) in one transaction through the outbox (plain), or the same
``N`` as one batch's children with an ``on_complete`` callback (batch), and
drains them with an embedded worker of ``C`` slots. It prints a Markdown
table of the median drain rate of each and the batch's ratio to plain, and
the time from the last child's end to the callback's start (median and
worst of the runs).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from bench.servers import drop_queue
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws


class Run:
    """One phase: the app, its tasks and the clocks they stop."""

    def __init__(
        self, endpoint: str, store_url: str, concurrency: int, sleep_s: float
    ) -> None:
        from flask import Flask
        from flask_sqs_jobs import SQSJobs

        self.sqs = sqs_client(endpoint)
        name, self.url = new_queue(self.sqs, "workflows")
        self.app = Flask(__name__)
        self.app.config.update(
            SQS_JOBS_QUEUES={"default": {"name": name}},
            SQS_JOBS_ENDPOINT_URL=endpoint,
            SQS_JOBS_REGION_NAME="us-east-1",
            SQS_JOBS_STORE_URL=store_url,
            SQS_JOBS_RECORD_JOBS=False,
            SQS_JOBS_IDLE_WAIT_SECONDS=1,
        )
        self.jobs = SQSJobs(self.app)
        self.concurrency = concurrency
        self.lock = threading.Lock()
        self.done = 0
        self.first: float | None = None
        self.last_child = 0.0
        self.callback: float | None = None

        @self.jobs.task
        def noop(n: int) -> None:
            now = time.perf_counter()
            if sleep_s:
                time.sleep(sleep_s)
            with self.lock:
                self.first = self.first or now
                self.done += 1
                self.last_child = max(self.last_child, time.perf_counter())

        @self.jobs.task
        def finished(batch_id: str) -> None:
            self.callback = time.perf_counter()

        self.noop, self.finished = noop, finished

    def drain(self, jobs: int, batch: bool) -> tuple[float, float | None]:
        """Write ``jobs`` children (or plain jobs), drain them: (jobs/s, callback s)."""
        with self.app.app_context():
            if batch:
                children = [self.noop.s(n=n) for n in range(jobs)]
                self.jobs.batch(children, on_complete=self.finished.s()).enqueue()
            else:
                store = self.jobs.store()
                with store.session() as session:  # type: ignore[attr-defined]
                    self.noop.options(session=session).enqueue_many(
                        [{"n": n} for n in range(jobs)]
                    )
                    session.commit()

            def should_stop() -> bool:
                return self.done >= jobs and (not batch or self.callback is not None)

            worker = self.jobs.create_worker(
                should_stop=should_stop, concurrency=self.concurrency
            )
            worker.run()
        assert self.first is not None
        rate = jobs / (self.last_child - self.first)
        wait = None if self.callback is None else self.callback - self.last_child
        drop_queue(self.sqs, self.url)
        self.jobs.store(self.app).close()
        return rate, wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflows")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    use_fake_aws()
    import structlog
    from flask_sqs_jobs.store import SQLAlchemyStore
    from tests.postgres import fresh_database
    from tests.postgres import postgres_cluster

    # One line per job would measure the terminal, not the store.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    rates: dict[str, list[float]] = {"plain": [], "batch": []}
    waits: list[float] = []
    with postgres_cluster() as server_url, ministack() as server:
        for _ in range(args.repeat):  # interleaved, so a busy moment hits both
            for name in ("plain", "batch"):
                url = fresh_database(server_url)
                store = SQLAlchemyStore(url)
                store.create_tables()
                store.close()
                run = Run(server.endpoint, url, args.concurrency, args.sleep_ms / 1000)
                rate, wait = run.drain(args.jobs, name == "batch")
                rates[name].append(rate)
                if wait is not None:
                    waits.append(wait)
    plain, batch = (statistics.median(rates[n]) for n in ("plain", "batch"))
    print(
        f"| {args.jobs} jobs of {args.sleep_ms:g} ms (median of {args.repeat}),"
        f" {args.concurrency}"
        " slots, PostgreSQL | plain jobs/s | batch children/s | ratio |\n"
        "| --- | --- | --- | --- |\n"
        f"| drain | {plain:.1f} | {batch:.1f} | {batch / plain:.2f} |\n\n"
        "last child's end to the callback's start:"
        f" median {statistics.median(waits) * 1000:.0f} ms,"
        f" worst {max(waits) * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
