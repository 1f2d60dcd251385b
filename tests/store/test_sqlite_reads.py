"""On SQLite a store's reads never wait for the database's write lock."""

from __future__ import annotations

import collections.abc as cabc
import sqlite3
import typing as t

import pytest
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.sql import _sqlalchemy


@pytest.fixture
def store(
    tmp_path: t.Any, monkeypatch: pytest.MonkeyPatch
) -> cabc.Iterator[SQLAlchemyStore]:
    # A short busy timeout: a read that waits for the lock fails within 1 s.
    monkeypatch.setattr(_sqlalchemy, "_SQLITE_BUSY_TIMEOUT_MS", 1000)
    made = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    made.create_tables()
    yield made
    made.close()


def test_reads_go_on_while_another_process_holds_the_write_lock(
    store: SQLAlchemyStore, tmp_path: t.Any
) -> None:
    assert store.cancellations().cancel("job-1")
    # Another process (the record writer, a relay) in a write transaction.
    writer = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        # A job's arrival reads its tombstone: it must not queue for the lock.
        assert store.cancellations().cancelled(["job-1", "job-2"]) == {"job-1"}
        records = store.job_records()
        assert records.get("job-1") is None
        assert records.recent() == []
        assert store.worker_registry().list() == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()
