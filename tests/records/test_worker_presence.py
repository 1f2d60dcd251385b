"""The worker's row: registered, refreshed (re-created if lost), removed; pruning."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import time

import pytest
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records._presence import WorkerPresence


@pytest.fixture
def store(tmp_path: object) -> cabc.Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path}/jobs.db")
    store.create_tables()
    yield store
    store.close()


def eventually(predicate: cabc.Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_presence_refreshes_recreates_prunes_and_removes(
    store: SQLAlchemyStore,
) -> None:
    now = dt.datetime.now(dt.UTC)
    records = store.job_records()
    records.write(
        [
            JobEvent(
                "old", "t", "default", "succeeded", 1, now - dt.timedelta(hours=2)
            ),
            JobEvent("new", "t", "default", "succeeded", 1, now),
        ]
    )
    busy = [1]
    presence = WorkerPresence(
        store.worker_registry(),
        queues=["default"],
        concurrency=4,
        busy_slots=lambda: busy[0],
        records=records,
        retention_seconds=3600,
        refresh_seconds=0.05,
    )
    registry = store.worker_registry()
    presence.start()
    try:
        eventually(
            lambda: [w.worker_id for w in registry.list()] == [presence.worker_id]
        )
        eventually(lambda: records.get("old") is None)
        assert records.get("new") is not None
        busy[0] = 3
        eventually(lambda: registry.list()[0].busy_slots == 3)
        registry.remove(presence.worker_id)
        eventually(lambda: len(registry.list()) == 1)
    finally:
        presence.stop()
    assert registry.list() == []


def test_a_store_failure_is_logged_and_the_service_keeps_going(
    tmp_path: object,
) -> None:
    broken = SQLAlchemyStore(f"sqlite:///{tmp_path}/no-tables.db")
    presence = WorkerPresence(
        broken.worker_registry(),
        queues=["default"],
        concurrency=1,
        busy_slots=lambda: 0,
        refresh_seconds=0.01,
    )
    from flask_sqs_jobs.engine.ops._store_errors import store_error_counts

    before = store_error_counts().get("workers", 0)
    presence.start()
    eventually(lambda: store_error_counts().get("workers", 0) >= before + 3)
    presence.stop()
    broken.close()


def test_presence_forgets_expired_idempotency_keys(store: SQLAlchemyStore) -> None:
    keys = store.idempotency_keys()
    for key, ttl in (("expired", 0.001), ("kept", 3600.0)):
        claim = keys.claim(key, payload_hash="h", job_id=key, lease_seconds=60)
        assert claim.token is not None
        keys.complete(key, claim.token, result=None, ttl_seconds=ttl)
    presence = WorkerPresence(
        store.worker_registry(),
        queues=["default"],
        concurrency=1,
        busy_slots=lambda: 0,
        forget_expired_keys=getattr(keys, "forget_expired"),  # noqa: B009
        refresh_seconds=0.05,
    )

    def stored_keys() -> set[str]:
        with store.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT key FROM sqs_jobs_idempotency")
            return {row[0] for row in rows}

    presence.start()
    try:
        eventually(lambda: stored_keys() == {"kept"})
    finally:
        presence.stop()


def test_a_store_failure_is_handed_to_on_error(tmp_path: object) -> None:
    broken = SQLAlchemyStore(f"sqlite:///{tmp_path}/no-tables.db")
    errors: list[BaseException] = []
    presence = WorkerPresence(
        broken.worker_registry(),
        queues=["default"],
        concurrency=1,
        busy_slots=lambda: 0,
        refresh_seconds=0.01,
        on_error=errors.append,
    )
    presence.start()
    eventually(lambda: len(errors) >= 2)
    presence.stop()
    broken.close()
    assert all("no such table" in str(error) for error in errors)
