"""Debounce: enqueues with one key within the window run once, with the last payload."""

from __future__ import annotations

import threading
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store.outbox import _rows
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

from tests.idempotency.conftest import RunWorker

Payload: t.TypeAlias = dict[str, t.Any]


def due_now(engine: sa.Engine) -> None:
    """The debounce window ends: move every row's send time into the past."""
    with engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE sqs_jobs_outbox SET available_at = created_at")
        )


def pending(engine: sa.Engine) -> list[tuple[str, str]]:
    with engine.connect() as connection:
        return [
            (row.job_id, row.body)
            for row in connection.execute(
                sa.text("SELECT job_id, body FROM sqs_jobs_outbox")
            )
        ]


def test_twenty_enqueues_run_once_with_the_last_payload(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[Payload] = []
    jobs.handler("reindex")(runs.append)
    engine = t.cast(t.Any, jobs.store(store_app)).engine
    with store_app.app_context():
        ids = [
            jobs.enqueue(
                "default", "reindex", {"n": n}, unique_key="user-7", debounce=30
            )
            for n in range(20)
        ]
        jobs.enqueue(
            "default", "reindex", {"n": "other"}, unique_key="user-8", debounce=30
        )
        relay = OutboxRelay(engine, jobs.queue_group())
        assert relay.run_pass(include_fresh=True) == 0  # not due: nothing sent
        assert [job_id for job_id, _ in pending(engine)].count(ids[-1]) == 1
        due_now(engine)
        assert relay.drain() == 2
    finished = run_worker(lambda f: f.count() >= 2)

    assert finished.values() == ["success", "success"]
    assert sorted(runs, key=str) == sorted([{"n": 19}, {"n": "other"}], key=str)
    assert {job_id for job_id, _ in finished.outcomes} >= {ids[-1]}


def test_an_enqueue_after_the_send_starts_a_new_window(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("reindex")(lambda payload: None)
    engine = t.cast(t.Any, jobs.store(store_app)).engine
    with store_app.app_context():
        relay = OutboxRelay(engine, jobs.queue_group())
        jobs.enqueue("default", "reindex", {"n": 1}, unique_key="k", debounce=30)
        due_now(engine)
        assert relay.drain() == 1
        jobs.enqueue("default", "reindex", {"n": 2}, unique_key="k", debounce=30)
        rows = pending(engine)
    assert len(rows) == 1
    assert '"n":2' in rows[0][1]


def test_a_rolled_back_debounce_leaves_the_row_as_it_was(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("reindex")(lambda payload: None)
    store = t.cast(t.Any, jobs.store(store_app))
    with store_app.app_context():
        jobs.enqueue("default", "reindex", {"n": 1}, unique_key="k", debounce=30)
        with store.session() as session:
            jobs.enqueue(
                "default",
                "reindex",
                {"n": 2},
                unique_key="k",
                debounce=30,
                session=session,
            )
            session.rollback()
        rows = pending(store.engine)
    assert len(rows) == 1
    assert '"n":1' in rows[0][1]


def test_debounce_without_a_sql_store_is_refused(app: Flask, jobs: SQSJobs) -> None:
    jobs.handler("reindex")(lambda payload: None)
    with pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.enqueue("default", "reindex", {}, unique_key="k", debounce=5)


def test_debounce_on_a_queue_group_of_its_own_says_what_to_use(
    app: Flask, jobs: SQSJobs
) -> None:
    with pytest.raises(ValueError, match="needs a store's outbox"):
        jobs.queue_group().enqueue_many(
            "default",
            [{"job_type": "reindex", "payload": {}, "unique_key": "k", "debounce": 5}],
        )


def test_an_enqueue_while_the_relay_holds_the_row_is_not_lost(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("reindex")(lambda payload: None)
    engine = t.cast(t.Any, jobs.store(store_app)).engine
    with store_app.app_context():
        jobs.enqueue("default", "reindex", {"n": 1}, unique_key="k", debounce=30)
    due_now(engine)

    def enqueue_again() -> None:
        with store_app.app_context():
            jobs.enqueue("default", "reindex", {"n": 2}, unique_key="k", debounce=30)

    later = threading.Thread(target=enqueue_again)
    with engine.connect() as connection:
        _rows.begin_locked(connection)
        claimed = _rows.claim(connection, limit=10)
        later.start()  # waits for the relay's lock, or comes after it
        _rows.delete(connection, [row.id for row in claimed])  # sent
        connection.commit()
    later.join(30)
    rows = pending(engine)

    assert len(claimed) == 1
    assert '"n":1' in claimed[0].body
    assert len(rows) == 1  # the newer payload waits in a new window
    assert '"n":2' in rows[0][1]
