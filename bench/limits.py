"""Limits on PostgreSQL: what a rate and a concurrency limit cost per job.

``python -m bench.limits [--jobs N] [--concurrency C]`` starts MiniStack (as
``python -m bench`` does) and a throwaway PostgreSQL cluster
(``tests/postgres.py``: needs PostgreSQL's binaries), then drains ``--jobs``
pre-filled jobs with an embedded ``JobWorker`` of ``--concurrency`` slots,
for no-op jobs and for 50 ms jobs, three ways: no limits, a ``RateLimit``
and a ``ConcurrencyLimit`` (each set high enough never to refuse a job, so
the drain measures what taking and returning costs, not waiting). A drain
lasts from the first handler start to the last handler end. It prints a
Markdown table of jobs per second and each drain's ratio to the drain
without limits.
"""

from __future__ import annotations

import argparse
import typing as t

from bench.idempotency import drain_with
from bench.servers import ministack
from bench.servers import use_fake_aws


def drain(
    endpoint: str,
    jobs: int,
    concurrency: int,
    sleep_s: float,
    store: t.Any,
    limits: tuple[t.Any, ...],
) -> float:
    """Drain ``jobs`` pre-filled jobs under ``limits``; return the jobs per second."""
    options = {"limit_store": store.limits()} if limits else {}
    return drain_with(endpoint, jobs, concurrency, sleep_s, {"limits": limits}, options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.limits")
    parser.add_argument("--jobs", type=int, default=1600)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    use_fake_aws()
    import structlog
    from flask_sqs_jobs import ConcurrencyLimit
    from flask_sqs_jobs import RateLimit
    from flask_sqs_jobs.store import SQLAlchemyStore
    from tests.postgres import fresh_database
    from tests.postgres import postgres_cluster

    # One line per job would measure the terminal, not the store.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    ways = {
        "no limits": (),
        "RateLimit": (RateLimit("bench", 1_000_000, per=1),),
        # Twice the slots: a slot is free before its job's permit comes back.
        "ConcurrencyLimit": (ConcurrencyLimit("bench", 2 * args.concurrency),),
    }
    rows = []
    with postgres_cluster() as server_url, ministack() as server:
        store = SQLAlchemyStore(fresh_database(server_url))
        store.create_tables()
        for sleep_ms in (0.0, 50.0):
            rates = {
                name: drain(
                    server.endpoint,
                    args.jobs,
                    args.concurrency,
                    sleep_ms / 1000,
                    store,
                    limits,
                )
                for name, limits in ways.items()
            }
            base = rates["no limits"]
            for name, rate in rates.items():
                kind = "no-op" if not sleep_ms else f"{sleep_ms:g} ms"
                rows.append(f"| {kind} | {name} | {rate:.1f} | {rate / base:.2f} |")
        store.close()
    print(
        f"| {args.jobs} jobs, {args.concurrency} slots, PostgreSQL | limits | jobs/s"
        " | of no limits |\n| --- | --- | --- | --- |\n" + "\n".join(rows)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
