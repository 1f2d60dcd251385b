"""Searching job records in the DynamoDB table, with ``Query`` only (never a ``Scan``).

- With a tag: one ``Query`` of the tag's entries (``pk = "tag#<tag>"``, one
  per transition of each job carrying it), newest first, within the range.
- Without: one ``Query`` per hour of the range (at most the retention), of
  the hour's listing (``pk = "jobs#<YYYYMMDDHH>"``), newest hour first.

The entries' job ids are read in ``BatchGetItem`` calls of 100; the job type
and status are checked on the records read, until the limit is met. So a
search reads what its tag (or its range) holds, never the table; a rare job
type over a long range reads every entry of that range.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

from .. import model as r


class _Listings(t.Protocol):
    def ids_of(
        self,
        partition: str,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> list[str]: ...

    def records(self, ids: list[str]) -> list[r.JobRecord]: ...


def find_records(
    listings: _Listings, search: r.JobSearch, retention: float
) -> list[r.JobRecord]:
    """The records ``search`` finds, newest first (see the module's docstring);
    ``retention``: how far back records are kept, in seconds."""
    found: list[r.JobRecord] = []
    seen: set[str] = set()
    for ids in _id_pages(listings, search, retention):
        fresh = [each for each in ids if each not in seen]
        seen.update(fresh)
        for start in range(0, len(fresh), 100):
            for record in listings.records(fresh[start : start + 100]):
                if _matches(record, search):
                    found.append(record)
                    if len(found) >= search.limit:
                        return found
    return found


def _id_pages(
    listings: _Listings, search: r.JobSearch, retention: float
) -> cabc.Iterator[list[str]]:
    if search.tag is not None:
        yield listings.ids_of(f"tag#{search.tag}", search.since, search.until)
        return
    now = dt.datetime.now(dt.UTC)
    oldest = now - dt.timedelta(seconds=retention + 3600)
    if search.since is not None:
        oldest = max(oldest, search.since)
    hour = min(now, search.until or now).replace(minute=0, second=0, microsecond=0)
    while hour >= oldest.replace(minute=0, second=0, microsecond=0):
        yield listings.ids_of(f"jobs#{hour:%Y%m%d%H}", search.since, search.until)
        hour -= dt.timedelta(hours=1)


def _matches(record: r.JobRecord, search: r.JobSearch) -> bool:
    if search.job_type is not None and record.job_type != search.job_type:
        return False
    if search.statuses is not None and record.status not in search.statuses:
        return False
    if search.tag is not None and search.tag not in record.tags:
        return False
    at = record.updated_at
    if at is not None and search.since is not None and at < search.since:
        return False
    return not (at is not None and search.until is not None and at >= search.until)
