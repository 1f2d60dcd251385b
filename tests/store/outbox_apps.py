"""Apps for the outbox tests of parked rows: two queues, rows the relay's at once."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

outbox = _outbox_rows.outbox


class World(t.NamedTuple):
    sqs: SQSClient
    store_url: str
    default_url: str
    orders_url: str


class Dropped:
    """A send after commit that never happens (its process died)."""

    def submit(self, rows: list[t.Any]) -> None:
        pass


class App(t.NamedTuple):
    app: Flask
    jobs: SQSJobs
    store: SQLAlchemyStore

    def relay(self, **options: t.Any) -> OutboxRelay:
        return OutboxRelay(
            self.store.engine, self.jobs.queue_group(self.app), **options
        )

    def write(self, queue: str, count: int, **options: t.Any) -> list[str]:
        """``count`` jobs written and committed in one transaction."""
        with self.app.app_context(), sa.orm.Session(self.store.engine) as session:
            ids = [
                self.jobs.enqueue(queue, "step", {"n": n}, session=session, **options)
                for n in range(count)
            ]
            session.commit()
        return ids


def refuse(app: App, queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every send to ``queue`` of ``app`` fails, entry by entry."""
    sqs_queue = app.jobs.queue_group(app.app).queue(queue)
    monkeypatch.setattr(
        sqs_queue, "send_batch", lambda entries: [("Throttled", "slow")] * len(entries)
    )


def due_now(store: SQLAlchemyStore) -> None:
    """End every back-off at once (instead of waiting for it)."""
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    with store.engine.begin() as connection:
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.parked_at.is_(None))
            .values(available_at=past)
        )
