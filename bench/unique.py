"""Unique jobs on PostgreSQL: what the key costs per job, against the same jobs without.

``python -m bench.unique [--jobs N] [--concurrency C] [--sleep-ms MS]``
starts MiniStack (as ``python -m bench`` does) and a throwaway PostgreSQL
cluster (``tests/postgres.py``: needs PostgreSQL's binaries), then, twice
(plain jobs, then each with a ``unique_key`` of its own): enqueues
``--jobs`` jobs (no-op, or sleeping ``--sleep-ms``) one by one with
``QueueGroup.enqueue`` (the key's take is one upsert before each send), and
drains them with an embedded ``JobWorker`` of ``--concurrency`` slots whose
hooks release each key as its job starts. Both runs are repeated
``--repeat`` times, interleaved; it prints a Markdown table of the median
jobs per second of each phase and the unique run's ratio to the plain one.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import typing as t

from bench.servers import drop_queue
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws


def run(
    endpoint: str, jobs: int, concurrency: int, store: t.Any | None, sleep_s: float
) -> tuple[float, float]:
    """Enqueue, then drain, ``jobs`` no-op jobs: (enqueues/s, jobs drained/s)."""
    from flask_sqs_jobs import JobWorker
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs import SqsQueue
    from flask_sqs_jobs.engine import use_unique_keys
    from flask_sqs_jobs.engine.unique import UniqueRelease

    sqs = sqs_client(endpoint)
    _, url = new_queue(sqs, "unique")
    group = QueueGroup({"jobs": {"queue": SqsQueue(url, boto_client=sqs)}})
    hooks = []
    if store is not None:
        keys = store.unique_keys()
        use_unique_keys(group, keys)
        hooks.append(UniqueRelease(lambda: keys, lambda queue, error: None))
    started = time.perf_counter()
    for n in range(jobs):
        group.enqueue(
            "jobs", "noop", {"n": n}, unique_key=None if store is None else f"k{n}"
        )
    enqueue_rate = jobs / (time.perf_counter() - started)
    done = 0
    lock = threading.Lock()
    first: list[float] = []

    def work(payload: dict[str, t.Any]) -> None:
        nonlocal done
        with lock:
            if not first:
                first.append(time.perf_counter())
        if sleep_s:
            time.sleep(sleep_s)
        with lock:
            done += 1

    worker = JobWorker(
        group,
        {"noop": work},
        should_stop=lambda: done >= jobs,
        idle_wait_seconds=1,
        concurrency=concurrency,
        hooks=hooks,
    )
    worker.run()
    drain_rate = jobs / (time.perf_counter() - first[0])
    drop_queue(sqs, url)
    return enqueue_rate, drain_rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.unique")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    sleep_s = args.sleep_ms / 1000
    use_fake_aws()
    import structlog
    from flask_sqs_jobs.store import SQLAlchemyStore
    from tests.postgres import fresh_database
    from tests.postgres import postgres_cluster

    # One line per job would measure the terminal, not the store.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    with postgres_cluster() as server_url, ministack() as server:
        store = SQLAlchemyStore(fresh_database(server_url))
        store.create_tables()
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], "unique": []}
        for _ in range(args.repeat):  # interleaved, so a busy moment hits both
            runs["plain"].append(
                run(server.endpoint, args.jobs, args.concurrency, None, sleep_s)
            )
            runs["unique"].append(
                run(server.endpoint, args.jobs, args.concurrency, store, sleep_s)
            )
        store.close()
    plain, unique = (
        tuple(statistics.median(r[i] for r in runs[name]) for i in (0, 1))
        for name in ("plain", "unique")
    )
    print(
        f"| {args.jobs} jobs of {args.sleep_ms:g} ms (median of {args.repeat}),"
        f" {args.concurrency} slots, PostgreSQL"
        " | plain jobs/s | unique_key= jobs/s | ratio |\n| --- | --- | --- | --- |\n"
        f"| enqueue, one by one | {plain[0]:.1f} | {unique[0]:.1f}"
        f" | {unique[0] / plain[0]:.2f} |\n"
        f"| drain | {plain[1]:.1f} | {unique[1]:.1f} | {unique[1] / plain[1]:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
