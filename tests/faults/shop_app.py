"""The shop of the end-to-end scenario: orders over HTTP, their jobs through the outbox.

Served by gunicorn (``tests.faults.shop_app:create_app()``) and run by
``flask --app tests.faults.shop_app:create_app sqs-worker``. Set up by
environment variables:

- ``SHOP_ENDPOINT``: the SQS endpoint (the fault proxy); S3 is where
  ``AWS_ENDPOINT_URL_S3`` says (another fault proxy).
- ``SHOP_QUEUES``: JSON, the ``SQS_JOBS_QUEUES`` setting (``orders``, ``bulk``).
- ``SHOP_STORE_URL``: the PostgreSQL database of the job store and the shop.
- ``SHOP_BUCKET``: the bucket of large payloads (over 100 kB).
- ``FAULT_APP_RECORD_DIR``: the handlers note ``start`` and ``done`` there, as
  the fault app's do (:func:`tests.faults.fault_app.record`).

``POST /orders`` takes JSON ``{"id", "mode", "big", "crash", "ms"}`` and, in
one transaction, writes the order's row and its jobs ``charge`` and ``ship``
(``ship`` carries a 300 kB manifest when ``big``). ``mode``: ``commit``;
``rollback`` (rolled back on purpose after everything was written);
``savepoint`` (a gift row and a ``gift`` job in a savepoint that is
released) or ``savepoint_rollback`` (the same savepoint, rolled back). With
``crash`` the web worker SIGKILLs itself right after the database committed,
before the jobs are handed to the send after commit: the relay must send them.

Every handler is idempotent and writes its effect, one row of
``shop_effects``, through ``current_job.session``, so the effect and the
completed key commit together; it returns the effect's id, which the job's
record keeps. The periodic ``tick`` (every minute) writes one too.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
import typing as t

import sqlalchemy as sa
import sqlalchemy.event
import sqlalchemy.orm
from flask import Flask
from flask import jsonify
from flask import request
from flask.typing import ResponseReturnValue
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore

from .fault_app import configure_logging
from .fault_app import record

#: Bytes of a big order's manifest; above the large-payload threshold.
MANIFEST_BYTES = 300_000
THRESHOLD_BYTES = 100_000

metadata = sa.MetaData()
orders = sa.Table(
    "shop_orders",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("mode", sa.String(32), nullable=False),
)
gifts = sa.Table(
    "shop_gifts",
    metadata,
    sa.Column("order_id", sa.String(64), primary_key=True),
)
#: One row per effect applied; no unique key, so a second run shows as a second row.
effects = sa.Table(
    "shop_effects",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("subject", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("job_id", sa.String(128), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
)


def manifest(order_id: str) -> str:
    """A big order's manifest: ``MANIFEST_BYTES`` of text derived from its id."""
    seed = hashlib.sha256(order_id.encode()).hexdigest()
    return (seed * (MANIFEST_BYTES // len(seed) + 1))[:MANIFEST_BYTES]


def job_ids(order_id: str) -> dict[str, str]:
    """The job id of each of an order's jobs, by job type."""
    return {kind: f"{order_id}-{kind}" for kind in ("charge", "ship", "gift")}


def _die(session: sa.orm.Session) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _effect(subject: str, kind: str, ms: float) -> dict[str, int]:
    record("start", {"id": current_job.job_id})
    if ms > 0:
        time.sleep(ms / 1000)  # the job's work, during which it may be killed
    effect_id = current_job.session.execute(
        sa.insert(effects)
        .values(subject=subject, kind=kind, job_id=current_job.job_id, pid=os.getpid())
        .returning(effects.c.id)
    ).scalar_one()
    record("done", {"id": current_job.job_id})
    return {"effect": effect_id}


def create_app() -> Flask:
    configure_logging()
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=json.loads(os.environ["SHOP_QUEUES"]),
        SQS_JOBS_ENDPOINT_URL=os.environ["SHOP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
        SQS_JOBS_STORE_URL=os.environ["SHOP_STORE_URL"],
        SQS_JOBS_LARGE_PAYLOADS={
            "bucket": os.environ["SHOP_BUCKET"],
            "threshold_bytes": THRESHOLD_BYTES,
        },
    )
    jobs = SQSJobs(app)

    @jobs.handler("charge", idempotent=True)
    def charge(payload: dict[str, t.Any]) -> dict[str, int]:
        return _effect(payload["order"], "charge", payload["ms"])

    @jobs.handler("ship", idempotent=True)
    def ship(payload: dict[str, t.Any]) -> dict[str, int]:
        if "manifest" in payload and payload["manifest"] != manifest(payload["order"]):
            raise ValueError(f"order {payload['order']}: the manifest was altered")
        return _effect(payload["order"], "ship", payload["ms"])

    @jobs.handler("gift", idempotent=True)
    def gift(payload: dict[str, t.Any]) -> dict[str, int]:
        return _effect(payload["order"], "gift", payload["ms"])

    @jobs.handler("tick", idempotent=True)
    def tick(payload: dict[str, t.Any]) -> dict[str, int]:
        assert current_job.scheduled_for is not None
        return _effect(current_job.scheduled_for.isoformat(), "tick", 0)

    jobs.schedule("tick", cron="* * * * *", job_type="tick", queue="orders")

    @app.post("/orders")
    def create_order() -> ResponseReturnValue:
        order = request.get_json()
        order_id, mode, ms = str(order["id"]), str(order["mode"]), order["ms"]
        ids = job_ids(order_id)
        store = jobs.store()
        assert isinstance(store, SQLAlchemyStore), "the shop runs on a SQL store"
        with store.session() as session:
            session.execute(sa.insert(orders).values(id=order_id, mode=mode))
            jobs.enqueue(
                "orders",
                "charge",
                {"order": order_id, "ms": ms},
                job_id=ids["charge"],
                session=session,
            )
            shipping: dict[str, t.Any] = {"order": order_id, "ms": ms}
            if order.get("big"):
                shipping["manifest"] = manifest(order_id)
            jobs.enqueue("bulk", "ship", shipping, job_id=ids["ship"], session=session)
            if mode.startswith("savepoint"):
                savepoint = session.begin_nested()
                session.execute(sa.insert(gifts).values(order_id=order_id))
                jobs.enqueue(
                    "orders",
                    "gift",
                    {"order": order_id, "ms": ms},
                    job_id=ids["gift"],
                    session=session,
                )
                if mode == "savepoint_rollback":
                    savepoint.rollback()
                else:
                    savepoint.commit()
            if mode == "rollback":
                session.rollback()
                return jsonify(order=order_id, committed=False)
            if order.get("crash"):
                # Listened for only now: a savepoint's release sends it too.
                sa.event.listen(session, "after_commit", _die)
            session.commit()
        return jsonify(order=order_id, committed=True), 201

    return app
