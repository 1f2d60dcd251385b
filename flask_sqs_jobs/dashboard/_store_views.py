"""What the dashboard reads from the job store, in one place.

Every expectation the store-backed pages have of the job records and the
worker registry is here, so the pages work unchanged whatever shape those
parts take, and say "not available" while a store lacks them:

- ``store.job_records()`` returns an object with
  ``recent(limit: int, status: str | None = None)``: records, newest first;
  ``status="failed"`` gives the failed ones (``failed`` and ``dead_lettered``).
- ``jobs.get_job(job_id)`` returns one record or None.
- A record has SPEC's fields: ``job_id``, ``job_type``, ``queue``, ``status``,
  ``attempts``, ``enqueued_at``, ``started_at``, ``finished_at``, ``result``,
  ``error``, ``progress``.
- ``store.worker_registry()`` returns an object with ``live()``: workers with
  ``id``, ``host``, ``pid``, ``queues``, ``concurrency``, ``busy_slots``,
  ``started_at``, ``last_seen_at``, ``version``.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import json
import typing as t

from flask import Flask

if t.TYPE_CHECKING:
    from .._extension import SQSJobs

NEEDS_STORE = "needs a job store (SQS_JOBS_STORE_URL)"
NOT_AVAILABLE = "not available: this job store keeps no {part}"

RECORD_FIELDS = (
    "job_id",
    "job_type",
    "queue",
    "status",
    "attempts",
    "enqueued_at",
    "started_at",
    "finished_at",
    "result",
    "error",
    "progress",
)
WORKER_FIELDS = (
    "id",
    "host",
    "pid",
    "queues",
    "concurrency",
    "busy_slots",
    "started_at",
    "last_seen_at",
    "version",
)
FAILED_STATUSES = frozenset({"failed", "dead_lettered"})
#: Records read to draw the last hour's charts.
CHART_RECORDS = 5000


class Unavailable(Exception):
    """A store-backed page cannot be shown; the text says why."""


def _store(jobs: SQSJobs, app: Flask) -> t.Any:
    if not jobs.has_store(app):
        raise Unavailable(NEEDS_STORE)
    return jobs.store(app)


def _records(jobs: SQSJobs, app: Flask) -> t.Any:
    part = getattr(_store(jobs, app), "job_records", None)
    if part is None:
        raise Unavailable(NOT_AVAILABLE.format(part="job records"))
    return part()


def recent_jobs(
    jobs: SQSJobs, app: Flask, limit: int, status: str | None = None
) -> list[dict[str, t.Any]]:
    """The newest ``limit`` records (``status="failed"``: only failed ones)."""
    records = _records(jobs, app)
    with app.app_context():
        found = records.recent(limit, status=status)
    return [as_fields(record, RECORD_FIELDS) for record in found]


def one_job(jobs: SQSJobs, app: Flask, job_id: str) -> dict[str, t.Any] | None:
    """One job's record, or None when the store has none for ``job_id``."""
    _store(jobs, app)
    get_job = getattr(jobs, "get_job", None)
    if get_job is None:
        raise Unavailable(NOT_AVAILABLE.format(part="job records"))
    with app.app_context():
        record = get_job(job_id)
    return None if record is None else as_fields(record, RECORD_FIELDS)


def live_workers(jobs: SQSJobs, app: Flask) -> list[dict[str, t.Any]]:
    """The workers that registered themselves and were seen recently."""
    part = getattr(_store(jobs, app), "worker_registry", None)
    if part is None:
        raise Unavailable(NOT_AVAILABLE.format(part="worker registry"))
    with app.app_context():
        workers = part().live()
    return [as_fields(worker, WORKER_FIELDS) for worker in workers]


@dataclasses.dataclass(frozen=True)
class Throughput:
    """Jobs finished per minute over the last hour, per queue, oldest minute first."""

    start: dt.datetime
    minutes: int
    succeeded: dict[str, list[int]]
    failed: dict[str, list[int]]

    def as_dict(self) -> dict[str, t.Any]:
        return {
            "start": self.start.isoformat().replace("+00:00", "Z"),
            "minutes": self.minutes,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


def throughput(
    jobs: SQSJobs, app: Flask, queues: cabc.Iterable[str], now: dt.datetime
) -> Throughput:
    """Count the records finished in each of the last 60 minutes."""
    minutes = 60
    end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    start = end - dt.timedelta(minutes=minutes)
    succeeded = {name: [0] * minutes for name in queues}
    failed = {name: [0] * minutes for name in succeeded}
    for record in recent_jobs(jobs, app, CHART_RECORDS):
        finished = record.get("finished_at")
        if (
            not isinstance(finished, dt.datetime)
            or record.get("queue") not in succeeded
        ):
            continue
        index = int((finished - start).total_seconds() // 60)
        if 0 <= index < minutes:
            target = failed if record.get("status") in FAILED_STATUSES else succeeded
            target[record["queue"]][index] += 1
    return Throughput(start, minutes, succeeded, failed)


def as_fields(item: object, fields: cabc.Iterable[str]) -> dict[str, t.Any]:
    """The named fields of a record or worker (a dataclass, a mapping, an object)."""
    if isinstance(item, cabc.Mapping):
        return {name: item.get(name) for name in fields}
    return {name: getattr(item, name, None) for name in fields}


def json_ready(value: t.Any) -> t.Any:
    """``value`` with datetimes as ISO 8601 text, so any JSON encoder takes it."""
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, cabc.Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.loads(json.dumps(value, default=str))
