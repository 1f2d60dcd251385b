"""What the dashboard reads from the job store, in one place.

- recent and failed jobs: ``store.job_records().recent(limit, status=...)``
  (failed: ``failed`` and ``dead_lettered``), newest update first; a search
  of them: ``store.job_records().find(search)`` (:mod:`._job_search`);
- one job: ``get_job(store, hooks, job_id)`` (this process's pending writes first);
  cancelling it: ``cancel(store, hooks, job_id)`` (``jobs.cancel``);
- workers: ``store.worker_registry().list()``, each ``live`` or ``lost`` by
  the threshold of ``flask sqs-jobs workers``;
- the charts: ``store.job_records().finished_per_minute(an hour ago)``, one
  grouped count rather than the records themselves.
A store that keeps no records or workers (``NotImplementedError``) makes the
page say "not available".
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import json
import typing as t

from ..config import AppParts
from ..engine.model import shown
from ..store.model import DEAD_LETTERED
from ..store.model import FAILED
from ..store.model import JobRecord
from ..store.model import JobRecords
from ..store.model import JobStore
from ..store.model import minute_of
from ..store.model import WorkerRecord
from ..store.model import WorkerRegistry
from ..store.records import cancel
from ..store.records import get_job
from ..store.records import STALE_AFTER_SECONDS

NEEDS_STORE = "needs a job store (SQS_JOBS_STORE_URL)"
NOT_AVAILABLE = "not available: this job store keeps no {part}"

#: What the pages show of a job record and of a worker: every field.
RECORD_FIELDS = tuple(field.name for field in dataclasses.fields(JobRecord))
WORKER_FIELDS = tuple(field.name for field in dataclasses.fields(WorkerRecord))
#: The statuses the failed jobs page and the charts' red bars count.
FAILED_STATUSES = frozenset({FAILED, DEAD_LETTERED})
#: The minutes the charts cover.
CHART_MINUTES = 60


class Unavailable(Exception):
    """A store-backed page cannot be shown; the text says why."""


def _store(parts: AppParts) -> JobStore:
    if parts.store is None:
        raise Unavailable(NEEDS_STORE)
    return parts.store


def records_of(parts: AppParts) -> JobRecords:
    # The retention bounds how far back DynamoDB's listing looks.
    retention = parts.config.record_retention_seconds
    try:
        return _store(parts).job_records(retention_seconds=retention)
    except NotImplementedError:
        raise Unavailable(NOT_AVAILABLE.format(part="job records")) from None


def _registry(parts: AppParts) -> WorkerRegistry:
    try:
        return _store(parts).worker_registry()
    except NotImplementedError:
        raise Unavailable(NOT_AVAILABLE.format(part="worker registry")) from None


def recent_jobs(
    parts: AppParts, limit: int, *, failed: bool = False
) -> list[dict[str, t.Any]]:
    """The ``limit`` most recently updated records (``failed``: only failed ones)."""
    found = records_of(parts).recent(limit, status=FAILED_STATUSES if failed else None)
    return [as_fields(record, RECORD_FIELDS) for record in found]


def one_job(parts: AppParts, job_id: str) -> dict[str, t.Any] | None:
    """One job's record, or None when the store has none for ``job_id``."""
    record = one_record(parts, job_id)
    return None if record is None else as_fields(record, RECORD_FIELDS)


def one_record(parts: AppParts, job_id: str) -> JobRecord | None:
    """One job's record as the store returns it, or None."""
    records_of(parts)
    return get_job(_store(parts), parts.hooks, job_id)


def cancel_job(parts: AppParts, job_id: str) -> bool:
    """Cancel one job as ``jobs.cancel`` does: True when known and not finished."""
    records_of(parts)
    try:
        return cancel(_store(parts), parts.hooks, job_id)
    except NotImplementedError:
        raise Unavailable(NOT_AVAILABLE.format(part="cancellations")) from None


def workers(parts: AppParts, now: dt.datetime) -> list[dict[str, t.Any]]:
    """Every registered worker, oldest first, with ``state`` ``live`` or ``lost``
    (not seen for ``STALE_AFTER_SECONDS``, as ``flask sqs-jobs workers`` says)."""
    return [
        {
            **as_fields(worker, WORKER_FIELDS),
            "state": "lost" if worker.is_lost(now, STALE_AFTER_SECONDS) else "live",
        }
        for worker in _registry(parts).list()
    ]


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
    parts: AppParts, queues: cabc.Iterable[str], now: dt.datetime
) -> Throughput:
    """The records finished in each of the last 60 minutes (the current one last):
    failed and dead-lettered ones as failed, the others as succeeded."""
    minutes = CHART_MINUTES
    start = minute_of(now) - dt.timedelta(minutes=minutes - 1)
    succeeded = {name: [0] * minutes for name in queues}
    failed = {name: [0] * minutes for name in succeeded}
    for group in records_of(parts).finished_per_minute(start):
        index = int((group.minute - start).total_seconds() // 60)
        if group.queue in succeeded and 0 <= index < minutes:
            target = failed if group.status in FAILED_STATUSES else succeeded
            target[group.queue][index] += group.count
    return Throughput(start, minutes, succeeded, failed)


def as_fields(item: object, fields: cabc.Iterable[str]) -> dict[str, t.Any]:
    """The named fields of a record or worker (a dataclass, a mapping, an object);
    a value nested too deep to show (a job's result) is ``{"unreadable": why}``."""
    if isinstance(item, cabc.Mapping):
        found = {name: item.get(name) for name in fields}
    else:
        found = {name: getattr(item, name, None) for name in fields}
    return {name: shown(value, f"the {name}") for name, value in found.items()}


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
