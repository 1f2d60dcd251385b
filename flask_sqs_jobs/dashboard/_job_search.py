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
from ..store.model import STATUSES
from ._store_reads import as_fields
from ._store_reads import FAILED_STATUSES
from ._store_reads import one_job
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
    given = filters.given
    if given["job_id"]:
        record = one_job(parts, given["job_id"])
        return [] if record is None or not _matches(record, given) else [record]
    status = given["status"] or None
    if status is not None and status not in STATUS_CHOICES:
        raise BadFilter(f"status must be one of {', '.join(STATUS_CHOICES)}")
    statuses = FAILED_STATUSES if status == "failed" else status
    try:
        search = job_search(
            tag=given["tag"] or None,
            job_type=given["job_type"] or None,
            status=statuses,
            since=_moment("since", given["since"]),
            until=_moment("until", given["until"]),
            limit=filters.limit,
        )
    except (TypeError, ValueError) as exc:
        raise BadFilter(str(exc)) from None
    return [
        as_fields(record, RECORD_FIELDS) for record in records_of(parts).find(search)
    ]


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


def _matches(record: dict[str, t.Any], given: dict[str, str]) -> bool:
    """Whether a record found by its id also passes the other filters given."""
    if given["tag"] and given["tag"] not in record["tags"]:
        return False
    if given["job_type"] and given["job_type"] != record["job_type"]:
        return False
    status = given["status"]
    if status == "failed":
        return record["status"] in FAILED_STATUSES
    return not status or status == record["status"]
