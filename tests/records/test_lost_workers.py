"""Rows of workers that were killed or lost: pruned after a retention, on any store."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store.model import WorkerRecord
from flask_sqs_jobs.store.records._presence import WorkerPresence


def _worker(worker_id: str, last_seen_at: dt.datetime) -> WorkerRecord:
    return WorkerRecord(
        worker_id=worker_id,
        host="host-a",
        pid=1234,
        queues=("default",),
        concurrency=4,
        busy_slots=0,
        started_at=last_seen_at - dt.timedelta(hours=1),
        last_seen_at=last_seen_at,
        version="0.1.0",
    )


def test_prune_lost_deletes_only_rows_not_refreshed_since_the_cut(
    store: JobStore,
) -> None:
    registry = store.worker_registry()
    now = dt.datetime.now(dt.UTC)
    registry.register(_worker("lost", now - dt.timedelta(days=2)))
    registry.register(_worker("quiet", now - dt.timedelta(hours=20)))
    registry.register(_worker("live", now))

    assert registry.prune_lost(now - dt.timedelta(days=1)) == 1
    assert [w.worker_id for w in registry.list()] == ["quiet", "live"]
    # Pruning again finds nothing: a second worker's prune is harmless.
    assert registry.prune_lost(now - dt.timedelta(days=1)) == 0


def test_a_running_worker_prunes_lost_rows_and_keeps_its_own(store: JobStore) -> None:
    registry = store.worker_registry()
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
    registry.register(_worker("killed-host:77:abcd", long_ago))
    presence = WorkerPresence(
        registry,
        queues=["default"],
        concurrency=2,
        busy_slots=lambda: 0,
        lost_worker_retention_seconds=60,
        refresh_seconds=0.05,
    )
    presence.start()
    try:
        deadline = time.monotonic() + 10
        while [w.worker_id for w in registry.list()] != [presence.worker_id]:
            assert time.monotonic() < deadline, registry.list()
            time.sleep(0.02)
    finally:
        presence.stop()
    assert registry.list() == []


@pytest.mark.parametrize("value", [0, -5, "a day", 1.5])
def test_the_retention_setting_must_be_a_positive_number_of_seconds(
    value: object,
) -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": "https://sqs.example/1/default"}},
        SQS_JOBS_LOST_WORKER_RETENTION_SECONDS=value,
    )
    with pytest.raises((TypeError, ValueError), match="LOST_WORKER_RETENTION_SECONDS"):
        SQSJobs(app)


def test_the_retention_setting_reaches_the_config() -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": "https://sqs.example/1/default"}},
        SQS_JOBS_LOST_WORKER_RETENTION_SECONDS=3600,
    )
    jobs = SQSJobs(app)
    with app.app_context():
        config = jobs.parts().config
    assert config.lost_worker_retention_seconds == 3600
