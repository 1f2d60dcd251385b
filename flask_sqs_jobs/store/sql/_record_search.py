"""Job records' tags and searches in SQL: ``sqs_jobs_job_tags``, ``sqs_jobs_jobs``.

A tag row is written in the transaction of its record's write, copying the
record's ``updated_at`` as it then stands (read from the record, so an older
write that the record refused cannot move it back). Every search is one
``SELECT`` that walks one index newest first and stops at the limit:
``(tag, updated_at)`` with a tag, else ``(job_type, updated_at)``,
``(status, updated_at)`` or ``(updated_at)``; filters beyond the index's own
are checked on the rows it reaches.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from .. import model as r
from ._tables import job_tags
from ._tables import jobs


def tag_upsert(insert: t.Any) -> t.Any:
    """The statement that writes one (job, tag) row, for ``executemany`` of
    ``{"tag_job_id", "tag_job_type", "tag"}``: nothing when the record is
    another job type's."""
    source = sa.select(
        jobs.c.job_id, sa.bindparam("tag", type_=sa.String()), jobs.c.updated_at
    ).where(
        jobs.c.job_id == sa.bindparam("tag_job_id"),
        jobs.c.job_type == sa.bindparam("tag_job_type"),
    )
    stmt = insert(job_tags).from_select(["job_id", "tag", "updated_at"], source)
    return stmt.on_conflict_do_update(
        index_elements=[job_tags.c.job_id, job_tags.c.tag],
        set_={"updated_at": stmt.excluded.updated_at},
    )


def write_tags(
    connection: sa.Connection, statement: t.Any, events: cabc.Sequence[r.JobEvent]
) -> None:
    """Write the tags of ``events`` (after their records, same transaction)."""
    rows = [
        {"tag_job_id": event.job_id, "tag_job_type": event.job_type, "tag": tag}
        for event in events
        for tag in event.tags
    ]
    if rows:
        connection.execute(statement, rows)


def find_query(search: r.JobSearch) -> sa.Select[t.Any]:
    """The one ``SELECT`` of ``search``, newest first, at most its limit."""
    if search.tag is not None:
        at = job_tags.c.updated_at
        query = (
            sa.select(jobs)
            .join(job_tags, job_tags.c.job_id == jobs.c.job_id)
            .where(job_tags.c.tag == search.tag)
        )
    else:
        at = jobs.c.updated_at
        query = sa.select(jobs)
    if search.job_type is not None:
        query = query.where(jobs.c.job_type == search.job_type)
    if search.statuses is not None:
        query = query.where(jobs.c.status.in_(sorted(search.statuses)))
    if search.since is not None:
        query = query.where(at >= search.since)
    if search.until is not None:
        query = query.where(at < search.until)
    return query.order_by(at.desc()).limit(search.limit)


def with_tags(
    connection: sa.Connection, records: list[r.JobRecord]
) -> list[r.JobRecord]:
    """``records`` with their tags: one ``SELECT`` by primary key prefix."""
    if not records:
        return records
    ids = [record.job_id for record in records]
    rows = connection.execute(
        sa.select(job_tags.c.job_id, job_tags.c.tag)
        .where(job_tags.c.job_id.in_(ids))
        .order_by(job_tags.c.job_id, job_tags.c.tag)
    ).all()
    tags: dict[str, list[str]] = {}
    for job_id, tag in rows:
        tags.setdefault(job_id, []).append(tag)
    return [
        dataclasses.replace(record, tags=tuple(tags[record.job_id]))
        if record.job_id in tags
        else record
        for record in records
    ]


def prune_batch(connection: sa.Connection, older_than: t.Any, limit: int) -> int:
    """Delete the ``limit`` oldest records last written before ``older_than``,
    and their tags: each a walk of one index; return how many records went."""
    ids = list(
        connection.execute(
            sa.select(jobs.c.job_id)
            .where(jobs.c.updated_at < older_than)
            .order_by(jobs.c.updated_at)
            .limit(limit)
        ).scalars()
    )
    if not ids:
        return 0
    connection.execute(
        sa.delete(job_tags).where(among(connection, job_tags.c.job_id, ids))
    )
    result = connection.execute(
        sa.delete(jobs).where(
            among(connection, jobs.c.job_id, ids), jobs.c.updated_at < older_than
        )
    )
    return int(result.rowcount or 0)


def among(
    connection: sa.Connection, column: t.Any, ids: cabc.Sequence[str]
) -> sa.ColumnElement[bool]:
    """``column`` is one of ``ids``: on PostgreSQL one array parameter (an
    ``IN`` list of thousands is far slower there), elsewhere an ``IN`` list."""
    if connection.dialect.name == "postgresql":
        array = sa.literal(list(ids), postgresql.ARRAY(sa.String()))
        return t.cast(sa.ColumnElement[bool], column == sa.any_(array))
    return t.cast(sa.ColumnElement[bool], column.in_(ids))
