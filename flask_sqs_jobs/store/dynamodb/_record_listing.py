"""The listing entries and finish counters of job records, sharded by job id.

A job's records live under its own key (:mod:`._records`); what lists and
counts them is spread over ``shards`` partition keys per hour, so no key
takes more than its share of the fleet's writes:

- listing: ``pk = "jobs#<YYYYMMDDHH>#<shard>"``, ``sk = "<updated_at>#<job_id>"``,
  one per transition, and the same under ``pk = "tag#<tag>#<shard>"`` for each
  of the job's tags;
- counters: ``pk = "counts#<YYYYMMDDHH>#<shard>"``,
  ``sk = "<YYYYMMDDHHMM>#<status>#<queue>"`` (the minute of ``finished_at``,
  UTC; the queue last, as a queue name may hold ``#``), whose ``count`` one
  ``ADD`` raises per transition into a final status.

``shard = zlib.crc32(job_id) % shards``: every entry and count of a job lands
in one shard. A read queries every shard of a partition, and the unsharded
key (``jobs#<YYYYMMDDHH>``, ``tag#<tag>``) written before shards existed, and
merges them newest first, a page at a time, so a read that stops at its limit
reads about a page per shard.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import heapq
import typing as t
import zlib

from .. import model as r
from ._record_items import epoch_value
from ._record_items import job_key
from ._record_items import job_record
from ._record_items import s_value
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

#: ``DynamoDBStore(record_shards=...)``: the default, and the bounds.
DEFAULT_SHARDS = 16
MAX_SHARDS = 256
#: Entries read by a listing's first page of each shard, then by each next page.
FIRST_PAGE = 100
NEXT_PAGE = 1000


def check_shards(shards: object) -> int:
    """``shards`` if it is an int from 1 to :data:`MAX_SHARDS`.

    :raises ValueError: any other value, saying what to pass.
    """
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise ValueError(
            f"record_shards must be an int from 1 to {MAX_SHARDS} (the listing"
            f" keys per hour, {DEFAULT_SHARDS} by default); got {shards!r}"
        )
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(
            f"record_shards must be from 1 to {MAX_SHARDS} (each shard's key takes"
            " about 1,000 write units a second; pick jobs/s x write units per job"
            f" / 1,000); got {shards}"
        )
    return shards


def shard_of(job_id: str, shards: int) -> int:
    """The shard of every listing entry and count of ``job_id``."""
    return zlib.crc32(job_id.encode("utf-8")) % shards


def hour_of(at: dt.datetime) -> str:
    """``YYYYMMDDHH`` of ``at`` in UTC: the hour part of a listing or counter key."""
    return f"{at.astimezone(dt.UTC):%Y%m%d%H}"


def listing_items(
    event: r.JobEvent, shards: int, retention: float
) -> list[dict[str, t.Any]]:
    """The listing entries of a transition: the hour's, then one per tag."""
    shard = shard_of(event.job_id, shards)
    entry = {
        PARTITION_KEY: s_value(f"jobs#{hour_of(event.at)}#{shard}"),
        SORT_KEY: s_value(f"{event.at.isoformat()}#{event.job_id}"),
        "job_id": s_value(event.job_id),
        TTL_ATTRIBUTE: epoch_value(event.at, retention),
    }
    return [entry] + [
        {**entry, PARTITION_KEY: s_value(f"tag#{tag}#{shard}")} for tag in event.tags
    ]


def count_update(
    event: r.JobEvent, table: str, shards: int, retention: float
) -> dict[str, t.Any] | None:
    """The ``Update`` adding one to the count of a transition into a final status
    (None for any other), to write in the transaction of the record's update."""
    if event.status not in r.FINAL:
        return None
    finished = (event.finished_at or event.at).astimezone(dt.UTC)
    shard = shard_of(event.job_id, shards)
    return {
        "TableName": table,
        "Key": {
            PARTITION_KEY: s_value(f"counts#{hour_of(finished)}#{shard}"),
            SORT_KEY: s_value(f"{finished:%Y%m%d%H%M}#{event.status}#{event.queue}"),
        },
        "UpdateExpression": "ADD #count :one SET #expires = :expires",
        "ExpressionAttributeNames": {"#count": "count", "#expires": TTL_ATTRIBUTE},
        "ExpressionAttributeValues": {
            ":one": {"N": "1"},
            ":expires": epoch_value(finished, retention),
        },
    }


class Listing:
    """The reads of a :class:`DynamoDBJobRecords`' table: listings (every
    shard), the records they name, the counters."""

    def __init__(self, client: t.Any, table: str, shards: int) -> None:
        self._client = client
        self._table = table
        self._shards = shards

    def ids_of(
        self,
        partition: str,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> cabc.Iterator[str]:
        """The jobs of a listing partition (``jobs#<hour>``, ``tag#<tag>``) in
        every shard, newest entry first, each once, written at or after
        ``since`` and before ``until``; read a page per shard at a time."""
        condition = "#pk = :pk"
        names = {"#pk": PARTITION_KEY}
        values = {}
        if since is not None:
            values[":since"] = s_value(since.isoformat())
        if until is not None:
            values[":until"] = s_value(until.isoformat())
        if values:
            names["#sk"] = SORT_KEY
            condition += {
                (True, True): " AND #sk BETWEEN :since AND :until",
                (True, False): " AND #sk >= :since",
                (False, True): " AND #sk < :until",
            }[since is not None, until is not None]
        keys = [f"{partition}#{shard}" for shard in range(self._shards)]
        shards = [
            self._items(condition, names, {**values, ":pk": s_value(key)})
            for key in [*keys, partition]
        ]
        seen: set[str] = set()
        newest_first = heapq.merge(
            *shards, key=lambda item: str(item[SORT_KEY]["S"]), reverse=True
        )
        for item in newest_first:
            job_id = str(item["job_id"]["S"])
            if job_id not in seen:
                seen.add(job_id)
                yield job_id

    def records(self, ids: list[str]) -> list[r.JobRecord]:
        """The records of ``ids``, in the same order (missing ones left out)."""
        by_id: dict[str, r.JobRecord] = {}
        for start in range(0, len(ids), 100):
            keys = [job_key(i) for i in ids[start : start + 100]]
            while keys:
                response = self._client.batch_get_item(
                    RequestItems={self._table: {"Keys": keys}}
                )
                for item in response["Responses"].get(self._table, []):
                    record = job_record(item)
                    by_id[record.job_id] = record
                keys = (
                    response.get("UnprocessedKeys", {})
                    .get(self._table, {})
                    .get("Keys", [])
                )
        return [by_id[i] for i in ids if i in by_id]

    def minute_counts(
        self, since: dt.datetime, now: dt.datetime
    ) -> list[r.MinuteCount]:
        """The counts of the minutes from ``since``'s to ``now``'s: one ``Query``
        per hour and shard (more only past 1 MB of counters), no record read."""
        since = since.astimezone(dt.UTC)
        counts: dict[tuple[dt.datetime, str, str], int] = {}
        hour = since.replace(minute=0, second=0, microsecond=0)
        while hour <= now:
            # The first hour's counters from since's minute on, the others' all.
            condition, names, values = "#pk = :pk", {"#pk": PARTITION_KEY}, {}
            if hour <= since:
                condition += " AND #sk >= :from"
                names["#sk"] = SORT_KEY
                values[":from"] = s_value(f"{since:%Y%m%d%H%M}")
            for shard in range(self._shards):
                items = self._items(
                    condition,
                    names,
                    {**values, ":pk": s_value(f"counts#{hour_of(hour)}#{shard}")},
                    newest_first=False,
                )
                for item in items:
                    minute, status, queue = str(item[SORT_KEY]["S"]).split("#", 2)
                    at = dt.datetime.strptime(minute, "%Y%m%d%H%M").replace(
                        tzinfo=dt.UTC
                    )
                    key = (at, queue, status)
                    counts[key] = counts.get(key, 0) + int(item["count"]["N"])
            hour += dt.timedelta(hours=1)
        return [r.MinuteCount(*key, count) for key, count in counts.items()]

    def _items(
        self,
        condition: str,
        names: dict[str, str],
        values: dict[str, t.Any],
        *,
        newest_first: bool = True,
    ) -> cabc.Iterator[dict[str, t.Any]]:
        """A ``Query``'s items, a page at a time: listings newest first, with a
        small first page; counters (a few per minute) in pages of up to 1 MB."""
        request: dict[str, t.Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not newest_first,
        }
        if newest_first:
            request["Limit"] = FIRST_PAGE
        while True:
            page = self._client.query(**request)
            yield from page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return
            request["ExclusiveStartKey"] = start
            if newest_first:
                request["Limit"] = NEXT_PAGE
