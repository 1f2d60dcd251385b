"""A send after commit slower than the relay's grace is still the only send."""

from __future__ import annotations

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


def test_the_relay_leaves_a_row_alone_while_its_send_after_commit_runs(
    sqs: SQSClient, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No grace at all: the row is the relay's as soon as it is committed,
    # unless the send after commit holds it.
    monkeypatch.setattr(_outbox_rows, "GRACE_SECONDS", 0.0)
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
    engine = sa.create_engine(store_url)
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
        with app.app_context(), sa.orm.Session(engine) as session:
            jobs.enqueue("default", "welcome", {"n": 1}, session=session)
            session.commit()
            assert sending.wait(30), "the send after commit never started"
            relay = OutboxRelay(store.engine, jobs.queue_group(app))
            assert relay.run_pass() == 0  # the row is held by the send in flight
            release.set()
            assert flush_all()
            assert relay.run_pass() == 0
        response = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
        assert len(response.get("Messages", [])) == 1
        assert len(calls) == 1
    finally:
        release.set()
        flush_all()
        engine.dispose()
        store.close()
