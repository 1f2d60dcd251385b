"""Rows that cannot be sent: blocked FIFO groups, attempt limits, parked rows."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from botocore.exceptions import ClientError
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
from flask_sqs_jobs.store.outbox import _write as _outbox
from flask_sqs_jobs.store.outbox._immediate import flush_all
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

from tests.store.test_outbox import pending_rows
from tests.store.test_outbox import received
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

outbox = _outbox_rows.outbox


class World(t.NamedTuple):
    sqs: SQSClient
    store_url: str
    default_url: str
    orders_url: str


@pytest.fixture
def world(sqs: SQSClient, store_url: str, monkeypatch: pytest.MonkeyPatch) -> World:
    """Two queues, a standard and a FIFO one; rows are the relay's at once.

    No send after commit (as if each web process died after its commit), and
    no grace period: what the relay sends is all that is sent.
    """
    monkeypatch.setattr(_outbox_rows, "GRACE_SECONDS", 0.0)
    monkeypatch.setattr(_outbox, "sender_for", lambda engine, group: _Dropped())
    default_url = create_queue(sqs, "park-default")
    orders_url = create_queue(sqs, "park-orders.fifo", fifo=True)
    return World(sqs, store_url, default_url, orders_url)


class _Dropped:
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


@pytest.fixture
def make_app(world: World) -> cabc.Iterator[t.Callable[..., App]]:
    """A process of the app (each call a new one, as after a restart)."""
    made: list[App] = []

    def make(**config: t.Any) -> App:
        app = Flask(__name__)
        app.config.update(
            SQS_JOBS_QUEUES={
                "default": {"name": "park-default"},
                "orders": {"name": "park-orders.fifo"},
            },
            SQS_JOBS_STORE_URL=world.store_url,
            SQS_JOBS_RECORD_JOBS=False,
            **config,
        )
        jobs = SQSJobs(app, boto_client=world.sqs)
        store = t.cast(SQLAlchemyStore, jobs.store(app))
        store.create_tables()
        made.append(App(app, jobs, store))
        return made[-1]

    yield make
    flush_all()
    for each in made:
        each.store.close()


def refuse(app: App, queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every send to ``queue`` of ``app`` fails, entry by entry."""
    sqs_queue = app.jobs.queue_group(app.app).queue(queue)
    monkeypatch.setattr(
        sqs_queue, "send_batch", lambda entries: [("Throttled", "slow")] * len(entries)
    )


@pytest.mark.parametrize("held_back_by", ["a back-off", "a parked row"])
def test_a_blocked_fifo_group_never_starves_the_other_queues(
    world: World,
    make_app: t.Callable[..., App],
    monkeypatch: pytest.MonkeyPatch,
    held_back_by: str,
) -> None:
    first = make_app(
        SQS_JOBS_OUTBOX_MAX_ATTEMPTS=1 if held_back_by == "a parked row" else 20
    )
    first.write("orders", 151, message_group_id="g")
    monkeypatch.setattr(_outbox_rows, "backoff_seconds", lambda attempts: 3600.0)
    with monkeypatch.context() as patch:
        refuse(first, "orders", patch)
        assert first.relay().run_pass() == 10  # the group's first request failed
    blocked = pending_rows(first.store)
    assert len(blocked) == 151
    if held_back_by == "a parked row":
        assert [r.parked_at is not None for r in blocked[:11]] == [True] * 10 + [False]

    ids = first.write("default", 5)
    relay = first.relay()
    assert relay.run_pass() == 5  # the first pass, behind 141 blocked rows
    assert sorted(
        b["job_id"] for b in received(world.sqs, world.default_url)
    ) == sorted(ids)

    # After a restart: a new process, a new relay, the same rows.
    later = make_app()
    ids = later.write("default", 5)
    assert later.relay().run_pass() == 5
    assert sorted(
        b["job_id"] for b in received(world.sqs, world.default_url)
    ) == sorted(ids)
    assert received(world.sqs, world.orders_url) == []
    assert len(pending_rows(later.store)) == 151


def _due_now(store: SQLAlchemyStore) -> None:
    """End every back-off at once (instead of waiting for it)."""
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    with store.engine.begin() as connection:
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.parked_at.is_(None))
            .values(available_at=past)
        )


def test_a_row_is_parked_after_max_attempts_with_its_last_error(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=3)
    made.write("default", 1)
    relay = made.relay()
    with monkeypatch.context() as patch:
        refuse(made, "default", patch)
        assert relay.run_pass() == 1
        assert relay.run_pass() == 0  # backing off: not tried again yet
        (row,) = pending_rows(made.store)
        assert (row.attempts, row.parked_at) == (1, None)
        assert row.available_at > dt.datetime.now(dt.UTC)
        for attempts in (2, 3):
            _due_now(made.store)
            assert relay.run_pass() == 1
            (row,) = pending_rows(made.store)
            assert row.attempts == attempts
        assert row.parked_at is not None
        assert row.last_error == "Throttled: slow"
        _due_now(made.store)
        assert relay.drain() == 0  # parked: never tried again
    assert relay.drain() == 0  # not even once SQS would take it
    assert received(world.sqs, world.default_url) == []
    assert len(pending_rows(made.store)) == 1


def test_an_unreadable_row_is_parked_and_the_others_are_sent(
    world: World, make_app: t.Callable[..., App], log_events: list[t.Any]
) -> None:
    made = make_app()
    ids = made.write("default", 3)
    poisoned = pending_rows(made.store)[1]
    with made.store.engine.begin() as connection:
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.id == poisoned.id)
            .values(message_attributes="{not json")
        )
    assert made.relay().drain() == 3
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted([ids[0], ids[2]])
    (row,) = pending_rows(made.store)
    assert row.id == poisoned.id
    assert row.parked_at is not None
    assert "message_attributes is not JSON" in row.last_error
    parked = [e for e in log_events if e["event"] == "outbox_row_parked"]
    assert parked[0]["row_ids"] == [poisoned.id]


def test_rows_of_a_deleted_queue_are_parked_not_retried_for_ever(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=2)
    assert made.jobs.queue_group(made.app).queue("default").url  # before the delete
    made.write("default", 2)
    world.sqs.delete_queue(QueueUrl=world.default_url)
    relay = made.relay()
    assert relay.run_pass() == 2
    _due_now(made.store)
    assert relay.run_pass() == 2
    rows = pending_rows(made.store)
    assert [r.attempts for r in rows] == [2, 2]
    assert all(r.parked_at is not None for r in rows)
    assert all(
        "NonExistentQueue" in r.last_error or "QueueDoesNotExist" in r.last_error
        for r in rows
    )
    _due_now(made.store)
    assert relay.drain() == 0


def test_an_oversized_row_fails_alone_not_its_whole_batch(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app()
    queue = made.jobs.queue_group(made.app).queue("default")
    assert queue.max_message_size > 4096  # read before the queue's limit is lowered
    small = made.write("default", 4)
    with made.app.app_context(), sa.orm.Session(made.store.engine) as session:
        big = made.jobs.enqueue("default", "big", {"blob": "x" * 4000}, session=session)
        session.commit()
    world.sqs.set_queue_attributes(
        QueueUrl=world.default_url, Attributes={"MaximumMessageSize": "1024"}
    )
    assert made.relay().run_pass() == 5
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted(small)
    (row,) = pending_rows(made.store)
    assert (row.job_id, row.attempts) == (big, 1)
    assert "shorter than 1024" in row.last_error


def test_a_request_refused_as_too_long_is_sent_one_message_at_a_time(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app()
    ids = made.write("orders", 4, message_group_id="g")
    queue = made.jobs.queue_group(made.app).queue("orders")
    real_send_batch = queue.send_batch
    requests: list[int] = []

    def too_long_together(entries: list[dict[str, t.Any]]) -> t.Any:
        requests.append(len(entries))
        if len(entries) > 1:
            code = "AWS.SimpleQueueService.BatchRequestTooLong"
            raise ClientError({"Error": {"Code": code}}, "SendMessageBatch")
        return real_send_batch(entries)

    monkeypatch.setattr(queue, "send_batch", too_long_together)
    assert made.relay().run_pass() == 4
    assert requests == [4, 1, 1, 1, 1]
    assert [b["job_id"] for b in received(world.sqs, world.orders_url)] == ids
    assert pending_rows(made.store) == []
