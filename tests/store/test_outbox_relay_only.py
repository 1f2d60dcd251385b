"""``SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT`` and ``send_after_commit=``: rows left
to the relays, which PostgreSQL wakes at the commit."""

from __future__ import annotations

import collections.abc as cabc
import time
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox._immediate import flush_all
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

from tests.store.test_outbox import pending_rows
from tests.store.test_outbox import received
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Made(t.NamedTuple):
    app: Flask
    jobs: SQSJobs
    store: SQLAlchemyStore
    sqs: SQSClient
    url: str

    def relay(self, **options: t.Any) -> OutboxRelay:
        return OutboxRelay(
            self.store.engine, self.jobs.queue_group(self.app), **options
        )

    def commit(self, **options: t.Any) -> str:
        """One job written and committed; what is sent after the commit is sent."""
        with self.app.app_context(), sa.orm.Session(self.store.engine) as session:
            job_id = self.jobs.enqueue(
                "default", "welcome", {"n": 1}, session=session, **options
            )
            session.commit()
        assert flush_all()
        return job_id

    def on_queue(self) -> list[str]:
        return [body["job_id"] for body in received(self.sqs, self.url)]


def _apps(sqs: SQSClient, url: str) -> cabc.Iterator[t.Callable[..., Made]]:
    queue_url = create_queue(sqs, "relay-only")
    made: list[Made] = []

    def make_app(**config: t.Any) -> Made:
        app = Flask(__name__)
        app.config.update(
            SQS_JOBS_QUEUES={"default": {"name": "relay-only"}},
            SQS_JOBS_STORE_URL=url,
            SQS_JOBS_RECORD_JOBS=False,
            **config,
        )
        jobs = SQSJobs(app, boto_client=sqs)
        store = t.cast(SQLAlchemyStore, jobs.store(app))
        store.create_tables()
        made.append(Made(app, jobs, store, sqs, queue_url))
        return made[-1]

    yield make_app
    flush_all()
    for each in made:
        each.store.close()


@pytest.fixture
def make(sqs: SQSClient, store_url: str) -> cabc.Iterator[t.Callable[..., Made]]:
    """Apps on a SQLite store, then on a PostgreSQL one."""
    yield from _apps(sqs, store_url)


@pytest.fixture
def make_on_postgresql(
    sqs: SQSClient, postgres_url: str
) -> cabc.Iterator[t.Callable[..., Made]]:
    yield from _apps(sqs, postgres_url)


def test_the_setting_leaves_each_commit_to_the_relays_which_take_it_at_once(
    make: t.Callable[..., Made],
) -> None:
    made = make(SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT=False)
    job_id = made.commit()
    assert made.on_queue() == []  # nothing sent by the committing process
    assert [row.job_id for row in pending_rows(made.store)] == [job_id]
    # No grace period to wait out: a relay's ordinary pass takes the row now.
    assert made.relay().run_pass() == 1
    assert made.on_queue() == [job_id]
    assert pending_rows(made.store) == []


def test_send_after_commit_per_call_overrides_the_setting_both_ways(
    make: t.Callable[..., Made],
) -> None:
    sending = make()
    left = sending.commit(send_after_commit=False)
    assert sending.on_queue() == []
    assert [row.job_id for row in pending_rows(sending.store)] == [left]
    assert sending.relay().run_pass() == 1
    assert sending.on_queue() == [left]

    relaying = make(SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT=False)
    sent = relaying.commit(send_after_commit=True)
    assert relaying.on_queue() == [sent]
    assert pending_rows(relaying.store) == []


def test_enqueue_many_and_task_options_leave_their_rows_to_the_relays(
    make: t.Callable[..., Made],
) -> None:
    made = make()

    @made.jobs.task(queue="default")
    def welcome(n: int) -> None:
        pass

    with made.app.app_context(), sa.orm.Session(made.store.engine) as session:
        many = made.jobs.enqueue_many(
            "default",
            [{"job_type": "welcome", "payload": {"n": n}} for n in range(3)],
            session=session,
            send_after_commit=False,
        )
        one = welcome.options(session=session, send_after_commit=False).enqueue(n=9)
        session.commit()
    assert flush_all()
    assert made.on_queue() == []
    assert sorted(row.job_id for row in pending_rows(made.store)) == sorted(
        [*many, one.job_id]
    )
    assert made.relay().drain() == 4
    assert sorted(made.on_queue()) == sorted([*many, one.job_id])


def test_a_rolled_back_transaction_leaves_nothing_for_the_relays(
    make: t.Callable[..., Made],
) -> None:
    made = make(SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT=False)
    with made.app.app_context(), sa.orm.Session(made.store.engine) as session:
        made.jobs.enqueue("default", "welcome", {"n": 1}, session=session)
        session.rollback()
    assert pending_rows(made.store) == []
    assert made.relay().drain() == 0
    assert made.on_queue() == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"send_after_commit": False}, "pass session= too"),
        ({"send_after_commit": "no", "session": object()}, "must be True or False"),
    ],
)
def test_send_after_commit_is_checked(
    make: t.Callable[..., Made], options: dict[str, t.Any], message: str
) -> None:
    made = make()
    with made.app.app_context(), pytest.raises(TypeError, match=message):
        made.jobs.enqueue("default", "welcome", {"n": 1}, **options)


def test_a_bad_setting_names_the_key(sqs: SQSClient, store_url: str) -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "relay-only"}},
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT="sometimes",
    )
    with pytest.raises((TypeError, ValueError), match="OUTBOX_SEND_AFTER_COMMIT"):
        SQSJobs(app, boto_client=sqs)


def test_on_postgresql_a_commit_wakes_an_idle_relay(
    make_on_postgresql: t.Callable[..., Made],
) -> None:
    made = make_on_postgresql(SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT=False)
    # An idle relay that would look again only after a minute: only the
    # commit's notification can make it send the job within the deadline.
    relay = made.relay(idle_seconds=60.0)
    relay.start()
    try:
        assert relay.run_pass() == 0  # the relay is idle, then listening
        _wait_until_listening(made)
        job_id = made.commit()
        deadline = time.monotonic() + 20
        seen: list[str] = []
        while not seen and time.monotonic() < deadline:
            seen = made.on_queue()
        assert seen == [job_id]
    finally:
        relay.stop()


def _wait_until_listening(made: Made) -> None:
    """Poll (with a deadline) until the relay's connection listens."""
    deadline = time.monotonic() + 20
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN sqs_jobs_outbox'"
    )
    while time.monotonic() < deadline:
        with made.store.engine.connect() as connection:
            listening = connection.execute(query).scalar_one()
        if listening:
            return
        time.sleep(0.05)
    raise AssertionError("the relay never listened")


def test_a_task_refuses_send_after_commit_without_a_session(
    make: t.Callable[..., Made],
) -> None:
    made = make()

    @made.jobs.task(queue="default")
    def welcome(n: int) -> None:
        pass

    relayed = welcome.options(send_after_commit=False)
    with made.app.app_context():
        with pytest.raises(TypeError, match="pass session= too"):
            relayed.enqueue(n=1)
        with pytest.raises(TypeError, match="pass session= too"):
            relayed.enqueue_many([{"n": 1}])
    assert made.on_queue() == []
