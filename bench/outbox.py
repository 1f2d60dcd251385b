"""The outbox: the relay and ``enqueue(..., session=)`` against raw baselines.

``python -m bench.outbox [--rows N] [--enqueues N] [--repeat R]`` starts
MiniStack (as ``python -m bench`` does) and a SQLite store in a temporary
directory, and measures, as medians of ``--repeat`` runs:

- relay: :class:`OutboxRelay` draining a backlog of ``--rows`` rows (the
  immediate send after commit turned off, as after a crash), against raw
  SendMessageBatch of the same bodies, ten a request, on the same server;
- enqueue: ``jobs.enqueue(..., session=)`` plus ``commit`` (the immediate
  send after commit on, in its background thread), against inserting the
  same row with a SQLAlchemy Core ``insert`` through the same kind of
  session and committing it.

It prints a Markdown table of rates and ratios (1.0 = as fast as the baseline).
"""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import statistics
import tempfile
import typing as t
import uuid

import sqlalchemy as sa
import sqlalchemy.orm

from bench.large_payloads import timed
from bench.servers import LOGS
from bench.servers import ministack
from bench.servers import sqs_client
from bench.servers import use_fake_aws
from bench.workers._common import production_structlog

RELAY_TARGET = 0.80
ENQUEUE_TARGET = 1.5


def raw_send(sqs: t.Any, url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(i), "MessageBody": body}
            for i, body in enumerate(bodies[start : start + 10])
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def measure_relay(
    sqs: t.Any, db: pathlib.Path, rows: int, ours_first: bool
) -> tuple[float, float]:
    """(raw seconds, relay seconds) for one backlog of ``rows``."""
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs.store import SQLAlchemyStore
    from flask_sqs_jobs.store.outbox import _write as _outbox
    from flask_sqs_jobs.store.outbox._relay import OutboxRelay

    raw_url = sqs.create_queue(QueueName=f"outbox-raw-{uuid.uuid4().hex[:8]}")[
        "QueueUrl"
    ]
    url = sqs.create_queue(QueueName=f"outbox-relay-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    group = QueueGroup.build(boto_client=sqs, queues={"jobs": {"url": url}})
    store = SQLAlchemyStore(f"sqlite:///{db}")
    store.create_tables()
    specs = [("noop", {"n": n}) for n in range(rows)]
    with sa.orm.Session(store.engine) as session:
        for start in range(0, rows, 1000):
            _outbox.add_many_to_outbox(
                session,
                group,
                "jobs",
                specs[start : start + 1000],
                send_after_commit=False,
            )
        session.commit()
    with store.engine.connect() as connection:
        query = sa.text("SELECT body FROM sqs_jobs_outbox ORDER BY id")
        bodies = list(connection.execute(query).scalars())
    relay = OutboxRelay(store.engine, group)
    if ours_first:
        ours = timed(relay.drain)
        raw = timed(lambda: raw_send(sqs, raw_url, bodies))
    else:
        raw = timed(lambda: raw_send(sqs, raw_url, bodies))
        ours = timed(relay.drain)
    store.close()
    db.unlink()
    return raw, ours


def measure_enqueue(
    sqs: t.Any, db: pathlib.Path, count: int, ours_first: bool, send: bool = True
) -> tuple[float, float]:
    """(Core insert + commit seconds, enqueue(session=) + commit seconds).

    :param send: with False each job is left to the relays
        (``send_after_commit=False``), which is what the commit path itself
        costs the caller.
    """
    from flask import Flask
    from flask_sqs_jobs import SQSJobs
    from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
    from flask_sqs_jobs.store.outbox._immediate import flush_all

    name = f"outbox-enqueue-{uuid.uuid4().hex[:8]}"
    sqs.create_queue(QueueName=name)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"jobs": {"name": name}},
        SQS_JOBS_STORE_URL=f"sqlite:///{db}",
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    store = jobs.store(app)
    store.create_tables()
    engine = sa.create_engine(f"sqlite:///{db}")
    params = {"MessageBody": '{"job_type":"noop","payload":{"n":1},"job_id":"x"}'}

    def core() -> None:
        insert = sa.insert(_outbox_rows.outbox)
        with sa.orm.Session(engine) as session:
            for _ in range(count):
                row = _outbox_rows.row_values(
                    "jobs", uuid.uuid4().hex, "noop", params, dt.datetime.now(dt.UTC)
                )
                session.execute(insert, row)
                session.commit()

    def ours() -> None:
        with sa.orm.Session(engine) as session:
            for _ in range(count):
                jobs.enqueue(
                    "jobs", "noop", {"n": 1}, session=session, send_after_commit=send
                )
                session.commit()

    with app.app_context():
        jobs.queue_group().queue("jobs").max_message_size  # noqa: B018 - look-ups first
        if ours_first:
            measured = timed(ours)
            baseline = timed(core)
        else:
            baseline = timed(core)
            measured = timed(ours)
        flush_all(60)
    engine.dispose()
    store.close()
    db.unlink()
    return baseline, measured


def production_logging_to(path: pathlib.Path) -> t.IO[t.Any]:
    """The benchmark's production logging (bench/LOGGING.md), into ``path``."""
    import structlog

    path.parent.mkdir(parents=True, exist_ok=True)
    if production_structlog() == "orjson":
        file: t.IO[t.Any] = path.open("wb")
        structlog.configure(logger_factory=structlog.BytesLoggerFactory(file))
    else:
        file = path.open("w")
        structlog.configure(logger_factory=structlog.WriteLoggerFactory(file))
    return file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.outbox")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--enqueues", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    use_fake_aws()
    log_file = production_logging_to(LOGS / "outbox.log")
    relay_runs: list[tuple[float, float]] = []
    enqueue_runs: list[tuple[float, float]] = []
    commit_runs: list[tuple[float, float]] = []
    with ministack() as server, tempfile.TemporaryDirectory() as tmp:
        sqs = sqs_client(server.endpoint)
        for run in range(args.repeat):
            db = pathlib.Path(tmp) / f"outbox-{run}.db"
            # Each run alternates which side goes first, against warm-up bias.
            relay_runs.append(measure_relay(sqs, db, args.rows, run % 2 == 1))
            first = run % 2 == 1
            enqueue_runs.append(measure_enqueue(sqs, db, args.enqueues, first))
            commit_runs.append(measure_enqueue(sqs, db, args.enqueues, first, False))
    log_file.close()
    raw = statistics.median(r for r, _ in relay_runs)
    relay = statistics.median(o for _, o in relay_runs)
    relay_ratio = statistics.median(r / o for r, o in relay_runs)
    print(
        f"| outbox, medians of {args.repeat} | baseline | flask-sqs-jobs | ratio |"
        f" target |\n| --- | --- | --- | --- | --- |\n"
        f"| relay draining {args.rows:,} rows (jobs/s) vs raw SendMessageBatch |"
        f" {args.rows / raw:,.0f} | {args.rows / relay:,.0f} | {relay_ratio:.2f} |"
        f" >= {RELAY_TARGET} |"
    )
    for what, runs in (
        ("send after commit in this process", enqueue_runs),
        ("send left to the relay", commit_runs),
    ):
        core = statistics.median(c for c, _ in runs) / args.enqueues * 1000
        ours = statistics.median(o for _, o in runs) / args.enqueues * 1000
        ratio = statistics.median(o / c for c, o in runs)
        print(
            f"| enqueue(session=) + commit, {what} (ms each, {args.enqueues:,}) vs"
            f" Core insert + commit | {core:.3f} | {ours:.3f} | {ratio:.2f}x |"
            f" <= {ENQUEUE_TARGET}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
