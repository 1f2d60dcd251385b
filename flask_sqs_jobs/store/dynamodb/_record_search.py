"""Searching job records in the DynamoDB table, with ``Query`` only (never a ``Scan``).

- With a tag: the tag's entries (``pk = "tag#<tag>#<shard>"``, one per
  transition of each job carrying it), a ``Query`` per shard merged newest
  first, within the range.
- Without: the same per hour of the range (at most the retention), of the
  hour's listing (``pk = "jobs#<YYYYMMDDHH>#<shard>"``), newest hour first.

Each read also queries the unsharded key written before shards existed
(:mod:`._record_listing`). The entries' job ids are read in ``BatchGetItem``
calls of 100; the job type and status are checked on the records read, until
the limit is met. So a search reads what its tag (or its range) holds, never
the table; a rare job type over a long range reads every entry of that range.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import itertools
import typing as t

from .. import model as r


class _Listings(t.Protocol):
    def ids_of(
        self,
        partition: str,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> cabc.Iterator[str]: ...

    def records(self, ids: list[str]) -> list[r.JobRecord]: ...


def find_records(
    listings: _Listings, search: r.JobSearch, retention: float
) -> list[r.JobRecord]:
    """The records ``search`` finds, newest first (see the module's docstring);
    ``retention``: how far back records are kept, in seconds."""
    pages = _id_pages(listings, search, retention)
    return matching_records(
        listings, pages, lambda record: _matches(record, search), search.limit
    )


def matching_records(
    listings: _Listings,
    pages: cabc.Iterable[cabc.Iterator[str]],
    matches: cabc.Callable[[r.JobRecord], bool],
    limit: int,
) -> list[r.JobRecord]:
    """The first ``limit`` records that ``matches``, of the ids of ``pages`` in
    order (each job once), read 100 at a time as the ids come."""
    found: list[r.JobRecord] = []
    seen: set[str] = set()
    for ids in pages:
        fresh = (each for each in ids if each not in seen)
        while batch := list(itertools.islice(fresh, 100)):
            seen.update(batch)
            for record in listings.records(batch):
                if matches(record):
                    found.append(record)
                    if len(found) >= limit:
                        return found
    return found


def _id_pages(
    listings: _Listings, search: r.JobSearch, retention: float
) -> cabc.Iterator[cabc.Iterator[str]]:
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
