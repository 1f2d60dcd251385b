"""Idempotent handlers on PostgreSQL: 50 ms jobs at 16 slots against the ideal.

``python -m bench.idempotency [--jobs N] [--concurrency C] [--sleep-ms MS]``
starts MiniStack (as ``python -m bench`` does) and a throwaway PostgreSQL
cluster (``tests/postgres.py``: needs PostgreSQL's binaries), then drains
``--jobs`` pre-filled jobs whose handler sleeps ``--sleep-ms`` with an
embedded ``JobWorker`` of ``--concurrency`` slots, twice: a plain handler,
then the same handler ``idempotent=True`` with the store's keys (a claim
before each job, a completion after it, renewals by the heartbeat). A drain
lasts from the first handler start to the last handler end. It prints a
Markdown table of jobs per second and each drain's ratio to the ideal
(slots x 1000 / MS jobs per second).
"""

from __future__ import annotations

import argparse
import threading
import time
import typing as t

from bench.ceiling import prefill
from bench.servers import drop_queue
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws


class Counter:
    """Counts finished handlers; remembers the first start and the last end."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.done = 0
        self.first_start: float | None = None
        self.last_end = 0.0
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            if self.first_start is None:
                self.first_start = time.perf_counter()

    def finished(self) -> None:
        with self._lock:
            self.done += 1
            self.last_end = time.perf_counter()

    def seconds(self) -> float:
        assert self.first_start is not None
        return self.last_end - self.first_start


def drain(
    endpoint: str,
    jobs: int,
    concurrency: int,
    sleep_s: float,
    store: t.Any | None,
) -> float:
    """Drain ``jobs`` pre-filled jobs; return the jobs per second."""
    options: dict[str, t.Any] = {}
    if store is not None:
        options = {
            "idempotency_keys": store.idempotency_keys(),
            "session_factory": store.session,
        }
    return drain_with(
        endpoint, jobs, concurrency, sleep_s, {"idempotent": store is not None}, options
    )


def drain_with(
    endpoint: str,
    jobs: int,
    concurrency: int,
    sleep_s: float,
    handler_options: dict[str, t.Any],
    worker_options: dict[str, t.Any],
) -> float:
    """Drain ``jobs`` pre-filled jobs whose handler sleeps ``sleep_s``, its
    ``JobHandler`` and ``JobWorker`` given these options; return the jobs per second."""
    from flask_sqs_jobs import JobWorker
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs import SqsQueue
    from flask_sqs_jobs.engine import JobHandler

    sqs = sqs_client(endpoint)
    _, url = new_queue(sqs, "drain")
    prefill(endpoint, url, jobs)
    counter = Counter(jobs)

    def work(payload: dict[str, t.Any]) -> None:
        counter.started()
        if sleep_s:
            time.sleep(sleep_s)
        counter.finished()

    group = QueueGroup({"jobs": {"queue": SqsQueue(url, boto_client=sqs)}})
    worker = JobWorker(
        group,
        {"noop": JobHandler(work, **handler_options)},
        should_stop=lambda: counter.done >= jobs,
        idle_wait_seconds=1,
        concurrency=concurrency,
        **worker_options,
    )
    worker.run()
    drop_queue(sqs, url)
    return jobs / counter.seconds()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idempotency")
    parser.add_argument("--jobs", type=int, default=1600)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sleep-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    use_fake_aws()
    import structlog
    from flask_sqs_jobs.store import SQLAlchemyStore
    from tests.postgres import fresh_database
    from tests.postgres import postgres_cluster

    # One line per job would measure the terminal, not the store.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    ideal = args.concurrency * 1000 / args.sleep_ms
    sleep_s = args.sleep_ms / 1000
    with postgres_cluster() as server_url, ministack() as server:
        store = SQLAlchemyStore(fresh_database(server_url))
        store.create_tables()
        plain = drain(server.endpoint, args.jobs, args.concurrency, sleep_s, None)
        guarded = drain(server.endpoint, args.jobs, args.concurrency, sleep_s, store)
        store.close()
    print(
        f"| {args.jobs} jobs of {args.sleep_ms:g} ms, {args.concurrency} slots,"
        f" PostgreSQL | jobs/s | of ideal ({ideal:g}/s) |\n| --- | --- | --- |\n"
        f"| plain handler | {plain:.1f} | {plain / ideal:.2f} |\n"
        f"| idempotent=True | {guarded:.1f} | {guarded / ideal:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
