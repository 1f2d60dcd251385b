"""The jobs page's search: its filters read from the query string, and the read.

Filters: ``job_id`` (one record, by its key), ``tag``, ``job_type``,
``status`` (one status, or ``failed`` for failed and dead-lettered jobs),
``since`` and ``until`` (ISO 8601; without a zone, UTC, as the page shows
times) and ``limit``. No filter: the most recently updated records. Every
read is one of the store's indexed reads (``get``, ``recent``, ``find``).
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import typing as t

from ..config import AppParts
from ..store.model import job_search
from ..store.model import JobRecord
from ..store.model import STATUSES
from ._store_reads import as_fields
from ._store_reads import FAILED_STATUSES
from ._store_reads import one_record
from ._store_reads import RECORD_FIELDS
from ._store_reads import records_of

DEFAULT_JOBS = 50
MAX_JOBS = 500
#: The query-string names of the filters, in the form's order.
FILTERS = ("job_id", "tag", "job_type", "status", "since", "until")
#: The ``status`` choices the form offers: ``failed`` stands for both failures.
STATUS_CHOICES = ("failed", *STATUSES)


class BadFilter(ValueError):
    """A filter of the query string is wrong; the text says which and why."""


@dataclasses.dataclass(frozen=True)
class JobFilters:
    """The jobs page's filters as given (text, for the form) and the limit."""

    given: dict[str, str]
    limit: int

    @property
    def any(self) -> bool:
        return any(self.given.values())


def read_filters(args: cabc.Mapping[str, str]) -> JobFilters:
    """The filters of a query string; an empty field is no filter."""
    given = {name: (args.get(name) or "").strip() for name in FILTERS}
    try:
        limit = int(args.get("limit") or DEFAULT_JOBS)
    except ValueError:
        raise BadFilter("limit must be a whole number") from None
    return JobFilters(given, max(1, min(MAX_JOBS, limit)))


def find_jobs(parts: AppParts, filters: JobFilters) -> list[dict[str, t.Any]]:
    """The records the filters find, newest first, as the page shows them.

    :raises BadFilter: a filter is wrong.
    :raises Unavailable: the store keeps no records.
    """
    return [as_fields(record, RECORD_FIELDS) for record in find_records(parts, filters)]


def find_records(
    parts: AppParts, filters: JobFilters, *, failed_only: bool = False
) -> list[JobRecord]:
    """The records the filters find, newest first; ``failed_only``: of the
    failed and dead-lettered ones only (what a retry may run again).

    :raises BadFilter: a filter is wrong, or names another status with
        ``failed_only``.
    :raises Unavailable: the store keeps no records.
    """
    given = filters.given
    status = given["status"] or None
    if status is not None and status not in STATUS_CHOICES:
        raise BadFilter(f"status must be one of {', '.join(STATUS_CHOICES)}")
    if failed_only and status not in (None, "failed", *FAILED_STATUSES):
        raise BadFilter("only failed or dead-lettered jobs can be run again")
    wanted = FAILED_STATUSES if status == "failed" or status is None else {status}
    if given["job_id"]:
        record = one_record(parts, given["job_id"])
        if record is None or not _matches(record, given):
            return []
        return (
            [record]
            if (status is None and not failed_only) or (record.status in wanted)
            else []
        )
    try:
        search = job_search(
            tag=given["tag"] or None,
            job_type=given["job_type"] or None,
            status=None if status is None and not failed_only else wanted,
            since=_moment("since", given["since"]),
            until=_moment("until", given["until"]),
            limit=filters.limit,
        )
    except (TypeError, ValueError) as exc:
        raise BadFilter(str(exc)) from None
    return records_of(parts).find(search)


def _moment(name: str, text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadFilter(
            f"{name} must be a date and time such as 2026-01-31T12:00 (UTC)"
        ) from None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment


def _matches(record: JobRecord, given: dict[str, str]) -> bool:
    """Whether a record found by its id also passes the tag and job type given."""
    if given["tag"] and given["tag"] not in record.tags:
        return False
    return not given["job_type"] or given["job_type"] == record.job_type
