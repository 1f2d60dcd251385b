"""A job store with the records and registry the store-backed pages expect.

It stands in for the real parts the way ``_store_views.py`` documents them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store._base import JobStore


@dataclasses.dataclass
class Record:
    job_id: str
    job_type: str
    queue: str
    status: str
    attempts: int = 1
    enqueued_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    result: t.Any = None
    error: str | None = None
    progress: t.Any = None


@dataclasses.dataclass
class Worker:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    busy_slots: int
    started_at: dt.datetime
    last_seen_at: dt.datetime
    version: str


class _Records:
    def __init__(self, records: list[Record]) -> None:
        self.records = records

    def recent(self, limit: int, status: str | None = None) -> list[Record]:
        found = [
            r
            for r in self.records
            if status is None or r.status in ("failed", "dead_lettered")
        ]
        return found[:limit]


class _Registry:
    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers

    def live(self) -> list[Worker]:
        return self.workers


class FakeStore(JobStore):
    kind = "fake"

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.workers: list[Worker] = []

    def create_tables(self) -> list[str]:
        return []

    def job_records(self) -> _Records:
        return _Records(self.records)

    def worker_registry(self) -> _Registry:
        return _Registry(self.workers)


class BareStore(JobStore):
    """A store without job records or a worker registry."""

    kind = "bare"

    def create_tables(self) -> list[str]:
        return []


class RecordingJobs(SQSJobs):
    """``SQSJobs`` with ``get_job`` over a :class:`FakeStore`."""

    def get_job(self, job_id: str) -> Record | None:
        store = t.cast(FakeStore, self.store())
        return next((r for r in store.records if r.job_id == job_id), None)
