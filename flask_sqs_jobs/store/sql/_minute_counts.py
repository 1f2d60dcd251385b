"""Jobs finished per minute in ``sqs_jobs_minute_counts``, for the charts.

The record writer's upsert of finishing writes returns the rows it changed;
a row that now holds a final status was moved into it by that write (a final
record refuses every write but a restart), so each finish is counted once,
in the same transaction as the record. The counts are added with one upsert
per (minute, queue, status) of the batch, in key order (so two writers never
wait on each other's rows in opposite orders), on this process's shard: the
writers of a busy minute update several rows rather than one. A chart then
reads at most minutes x queues x statuses x :data:`SHARDS` rows, whatever the
number of jobs.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import datetime as dt
import os
import typing as t

import sqlalchemy as sa

from .. import model as r
from ._tables import minute_counts

#: Rows per (minute, queue, status): processes add to ``pid % SHARDS``.
SHARDS = 8

#: A finished row as the upsert returns it: queue, status, finished_at.
Finished: t.TypeAlias = tuple[str, str, dt.datetime | None]


def count_upsert(insert: t.Any) -> t.Any:
    """The statement adding ``count`` to one counter row, for ``executemany``."""
    stmt = insert(minute_counts)
    return stmt.on_conflict_do_update(
        index_elements=[
            minute_counts.c.minute,
            minute_counts.c.queue,
            minute_counts.c.status,
            minute_counts.c.shard,
        ],
        set_={"count": minute_counts.c["count"] + stmt.excluded["count"]},
    )


def add_finished(
    connection: sa.Connection, statement: t.Any, rows: cabc.Iterable[Finished]
) -> None:
    """Count the rows of ``rows`` that hold a final status, per minute finished."""
    counts = collections.Counter(
        (r.minute_of(finished_at), queue, status)
        for queue, status, finished_at in rows
        if status in r.FINAL and finished_at is not None
    )
    if not counts:
        return
    shard = os.getpid() % SHARDS
    connection.execute(
        statement,
        [
            {
                "minute": minute,
                "queue": queue,
                "status": status,
                "shard": shard,
                "count": count,
            }
            for (minute, queue, status), count in sorted(counts.items())
        ],
    )


def finished_per_minute(
    connection: sa.Connection, since: dt.datetime
) -> list[r.MinuteCount]:
    """One ``GROUP BY`` of the counter rows from ``since``'s minute on."""
    total = sa.func.sum(minute_counts.c.count)
    query = (
        sa.select(
            minute_counts.c.minute, minute_counts.c.queue, minute_counts.c.status, total
        )
        .where(minute_counts.c.minute >= r.minute_of(since))
        .group_by(minute_counts.c.minute, minute_counts.c.queue, minute_counts.c.status)
    )
    return [
        r.MinuteCount(minute, queue, status, int(count))
        for minute, queue, status, count in connection.execute(query)
    ]


def prune_counts(connection: sa.Connection, older_than: dt.datetime) -> int:
    """Delete the counters of minutes before ``older_than`` (a primary-key range)."""
    result = connection.execute(
        sa.delete(minute_counts).where(minute_counts.c.minute < r.minute_of(older_than))
    )
    return int(result.rowcount or 0)
