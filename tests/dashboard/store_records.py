"""Job records and workers written into a real store, as producers and workers do."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store import WorkerRecord
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records._recording import FINAL


def record_job(
    store: JobStore,
    job_id: str,
    job_type: str,
    status: str,
    finished_at: dt.datetime,
    *,
    queue: str = "default",
    attempts: int = 1,
    result: t.Any = None,
    error: str | None = None,
    progress: float | None = None,
    progress_message: str | None = None,
    tags: tuple[str, ...] = (),
) -> None:
    """Write a job's ``queued``, ``running`` and ``status`` transitions, one write
    each (``finished_at`` is set when ``status`` is final)."""
    enqueued = finished_at - dt.timedelta(seconds=4)
    started = finished_at - dt.timedelta(seconds=2)

    def event(status: str, attempts: int, at: dt.datetime, **fields: t.Any) -> JobEvent:
        return JobEvent(
            job_id, job_type, queue, status, attempts, at, tags=tags, **fields
        )

    records = store.job_records()
    records.write([event("queued", 0, enqueued, enqueued_at=enqueued)])
    records.write(
        [event("running", attempts, started, enqueued_at=enqueued, started_at=started)]
    )
    records.write(
        [
            event(
                status,
                attempts,
                finished_at,
                started_at=started,
                finished_at=finished_at if status in FINAL else None,
                result=None if result is None else json.dumps(result),
                error=error,
                progress=progress,
                progress_message=progress_message,
            )
        ]
    )


def register_worker(
    store: JobStore,
    host: str,
    pid: int,
    last_seen_at: dt.datetime,
    *,
    queues: tuple[str, ...] = ("default",),
    concurrency: int = 4,
    busy_slots: int = 0,
) -> WorkerRecord:
    """Register a worker last seen at ``last_seen_at``, as a worker starting up does."""
    worker = WorkerRecord(
        worker_id=f"{host}:{pid}:0a1b2c3d",
        host=host,
        pid=pid,
        queues=queues,
        concurrency=concurrency,
        busy_slots=busy_slots,
        started_at=last_seen_at - dt.timedelta(minutes=30),
        last_seen_at=last_seen_at,
        version="0.1.0",
    )
    store.worker_registry().register(worker)
    return worker
