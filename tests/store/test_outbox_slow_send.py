"""A send after commit slower than the relay's grace is still the only send."""

from __future__ import annotations

import collections.abc as cabc
import threading
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
from flask_sqs_jobs.store.outbox._immediate import flush_all
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class SlowSend(t.NamedTuple):
    app: Flask
    jobs: SQSJobs
    store: SQLAlchemyStore
    sqs: SQSClient
    url: str
    #: Set once the first send is under way; it goes on once ``release`` is.
    sending: threading.Event
    release: threading.Event
    #: One entry per SendMessageBatch request.
    calls: list[str]

    def commit_one(self) -> None:
        """Write a job, commit, and wait until its send after commit is stuck."""
        with sa.orm.Session(self.store.engine) as session:
            self.jobs.enqueue("default", "welcome", {"n": 1}, session=session)
            session.commit()
        assert self.sending.wait(30), "the send after commit never started"

    def messages(self) -> int:
        response = self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
        return len(response.get("Messages", []))


@pytest.fixture
def slow(
    sqs: SQSClient, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> cabc.Iterator[SlowSend]:
    """An app whose first SendMessageBatch waits until the test releases it."""
    url = create_queue(sqs, "slow-send")
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "slow-send"}},
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    store = t.cast(SQLAlchemyStore, jobs.store(app))
    store.create_tables()
    queue = jobs.queue_group(app).queue("default")
    real_send_batch = queue.send_batch
    sending, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow_first_send(*args: t.Any, **kwargs: t.Any) -> t.Any:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            sending.set()
            assert release.wait(30), "the test never released the send"
        return real_send_batch(*args, **kwargs)

    monkeypatch.setattr(queue, "send_batch", slow_first_send)
    try:
        with app.app_context():
            yield SlowSend(app, jobs, store, sqs, url, sending, release, calls)
    finally:
        release.set()
        flush_all()
        store.close()


def test_the_relay_leaves_a_row_alone_while_its_send_after_commit_runs(
    slow: SlowSend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No grace at all: the row is the relay's as soon as it is committed,
    # unless the send after commit holds it.
    monkeypatch.setattr(_outbox_rows, "GRACE_SECONDS", 0.0)
    slow.commit_one()
    relay = OutboxRelay(slow.store.engine, slow.jobs.queue_group())
    assert relay.run_pass() == 0  # the row is held by the send in flight
    slow.release.set()
    assert flush_all()
    assert relay.run_pass() == 0
    assert slow.messages() == 1
    assert len(slow.calls) == 1


def test_relay_once_leaves_a_row_alone_while_its_send_after_commit_runs(
    slow: SlowSend,
) -> None:
    # relay --once takes rows still in their grace period too; never one that
    # a send after commit holds (SQLite: its lease; PostgreSQL: its row lock).
    slow.commit_one()
    relayed = slow.app.test_cli_runner().invoke(
        args=["sqs-jobs", "outbox", "relay", "--once"]
    )
    assert relayed.exit_code == 0, relayed.output
    assert "sent 0 job(s)" in relayed.output
    slow.release.set()
    assert flush_all()
    assert slow.messages() == 1
    assert len(slow.calls) == 1


def test_retrying_a_row_while_its_send_after_commit_runs_sends_it_once(
    slow: SlowSend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator retries the row while its send after commit travels: the
    # row must stay the sender's, or the relay would send it a second time.
    monkeypatch.setattr(_outbox_rows, "GRACE_SECONDS", 0.0)
    slow.commit_one()
    with slow.store.engine.connect() as connection:
        query = sa.text("SELECT id FROM sqs_jobs_outbox")
        (row_id,) = connection.execute(query).scalars()
    runner = slow.app.test_cli_runner()
    if slow.store.engine.dialect.name == "sqlite":
        retried = runner.invoke(args=["sqs-jobs", "outbox", "retry", str(row_id)])
        assert retried.exit_code == 0, retried.output
        assert f"being sent now, left alone: {row_id}" in retried.output
        relay = OutboxRelay(slow.store.engine, slow.jobs.queue_group())
        assert relay.run_pass() == 0
        slow.release.set()
    else:
        # PostgreSQL: the send holds the row's lock, so the retry waits for it
        # and then finds the row sent.
        results: list[t.Any] = []
        retrying = threading.Thread(
            target=lambda: results.append(
                runner.invoke(args=["sqs-jobs", "outbox", "retry", str(row_id)])
            )
        )
        retrying.start()
        slow.release.set()
        retrying.join(30)
        (result,) = results
        assert result.exit_code == 1, result.output
        assert f"no outbox row {row_id}" in result.output
    assert flush_all()
    assert OutboxRelay(slow.store.engine, slow.jobs.queue_group()).drain() == 0
    assert slow.messages() == 1
    assert len(slow.calls) == 1
