"""Job records in ``sqs_jobs_jobs`` (their tags in ``sqs_jobs_job_tags``).

Each transition is one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (on
SQLite and PostgreSQL alike); a batch of them shares one transaction. The
``WHERE`` holds every rule of :mod:`._records` (same job type, not finished,
not older), so racing writers need no lock. When not every row was written
(or the driver does not say: psycopg), the batch's records' job types are
then read in the same transaction, to report the writes refused for theirs.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite

from ...engine.sqs import read_result
from .. import model as r
from ._minute_counts import add_finished
from ._minute_counts import count_upsert
from ._minute_counts import Finished
from ._minute_counts import finished_per_minute
from ._minute_counts import prune_counts
from ._record_search import among
from ._record_search import find_query
from ._record_search import prune_batch
from ._record_search import tag_upsert
from ._record_search import with_tags
from ._record_search import write_tags
from ._tables import jobs
from ._tables import reading

#: Records deleted per transaction by :meth:`SQLJobRecords.prune`.
PRUNE_BATCH = 2000

#: The dialects whose upsert the records use.
SUPPORTED_DIALECTS = ("postgresql", "sqlite")

#: The shape of every write that ends an attempt (its upsert returns the rows
#: it changed, which the minute counts read).
_SETTLED = "settled"
_SHAPES = (r.QUEUED, r.RUNNING, r.PROGRESS, _SETTLED)
_COLUMNS = tuple(column.name for column in jobs.columns)


def dialect_insert(engine: sa.Engine) -> t.Any:
    """The ``insert`` of ``engine``'s dialect, which has ``on_conflict_do_update``."""
    name = engine.dialect.name
    if name == "postgresql":
        return postgresql.insert
    if name == "sqlite":
        return sqlite.insert
    raise RuntimeError(
        f"job records and workers need SQLite or PostgreSQL; this store's database"
        f" is {name}. Use one of {', '.join(SUPPORTED_DIALECTS)}, or a DynamoDBStore"
    )


class SQLJobRecords:
    """The job records (a ``JobRecords``) in ``sqs_jobs_jobs``.

    Written by each process's record writer thread (batches of up to 200
    events); read by ``jobs.get_job``, ``flask sqs-jobs`` and the dashboard;
    pruned by each worker's presence service. Holds no lock: the upserts'
    ``WHERE`` lets any number of processes write the same job at once.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        insert = dialect_insert(engine)
        self._statements = {
            (shape, restart): _upsert(insert, shape, restart)
            for shape in _SHAPES
            for restart in (False, True)
        }
        self._tags = tag_upsert(insert)
        self._counts = count_upsert(insert)

    def write(self, events: cabc.Sequence[r.JobEvent]) -> list[r.RefusedWrite]:
        """Apply ``events`` in one transaction; return the writes refused for type.

        One ``executemany`` per (shape, restart) of each round, plus one
        ``SELECT`` when the counts fall short. A write that is older, or over a
        finished record, is skipped silently. Database errors propagate and
        roll the whole batch back; the writer counts and logs them.
        """
        written: list[r.JobEvent] = []
        counts: list[int] = []
        finished: list[Finished] = []
        with self._engine.begin() as connection:
            for round_ in r.in_rounds(r.merge_events(events)):
                batches: dict[tuple[str, bool], list[r.JobEvent]] = {}
                for event in round_:
                    key = (_shape(event), event.may_restart)
                    batches.setdefault(key, []).append(event)
                for key, batch in batches.items():
                    rows = [_row(event) for event in batch]
                    result = connection.execute(self._statements[key], rows)
                    if key[0] == _SETTLED:
                        changed = [t.cast(Finished, tuple(row)) for row in result]
                        finished += changed
                        counts.append(len(changed))
                    else:
                        counts.append(result.rowcount)
                    written += batch
                write_tags(connection, self._tags, round_)
            add_finished(connection, self._counts, finished)
            # A count of -1: the driver does not count an executemany (psycopg).
            if min(counts, default=0) >= 0 and sum(counts) == len(written):
                return []
            return _refused(connection, written)

    def get(self, job_id: str) -> r.JobRecord | None:
        """One ``SELECT`` by primary key (and one of its tags); None when no
        record was written."""
        with reading(self._engine) as connection:
            row = connection.execute(
                sa.select(jobs).where(jobs.c.job_id == job_id)
            ).first()
            if row is None:
                return None
            return with_tags(connection, [_job_record(row._mapping)])[0]

    def recent(
        self,
        limit: int = 50,
        *,
        status: r.StatusFilter = None,
        queue: str | None = None,
    ) -> list[r.JobRecord]:
        """The latest updated first: one ``SELECT`` on an ``updated_at`` index.

        :raises ValueError: ``status`` names no status (:func:`check_status`).
        """
        statuses = r.check_status(status)
        query = sa.select(jobs).order_by(jobs.c.updated_at.desc()).limit(limit)
        if statuses is not None:
            query = query.where(jobs.c.status.in_(sorted(statuses)))
        if queue is not None:
            query = query.where(jobs.c.queue == queue)
        with reading(self._engine) as connection:
            rows = connection.execute(query).all()
            return with_tags(connection, [_job_record(row._mapping) for row in rows])

    def find(self, search: r.JobSearch) -> list[r.JobRecord]:
        """One ``SELECT`` on one index, newest first (:mod:`._record_search`),
        and one of the found records' tags."""
        with reading(self._engine) as connection:
            rows = connection.execute(find_query(search)).all()
            return with_tags(connection, [_job_record(row._mapping) for row in rows])

    def finished_per_minute(self, since: dt.datetime) -> list[r.MinuteCount]:
        """One ``GROUP BY`` of ``sqs_jobs_minute_counts`` from ``since``'s minute
        (:mod:`._minute_counts`): rows per minute and queue, never per job."""
        with reading(self._engine) as connection:
            return finished_per_minute(connection, since)

    def prune(self, older_than: dt.datetime, limit: int | None = None) -> int:
        """Delete records last written before ``older_than``, oldest first, in
        transactions of at most :data:`PRUNE_BATCH` rows; return how many.

        :param limit: delete about that many at most (None: all), so a caller
            can interleave other work and stop between batches.
        """
        deleted = 0
        while limit is None or deleted < limit:
            batch = PRUNE_BATCH if limit is None else min(PRUNE_BATCH, limit - deleted)
            with self._engine.begin() as connection:
                count = prune_batch(connection, older_than, batch)
                if count < batch:
                    prune_counts(connection, older_than)
            deleted += count
            if count < batch:
                break
        return deleted


def _refused(
    connection: sa.Connection, written: list[r.JobEvent]
) -> list[r.RefusedWrite]:
    """The writes among ``written`` refused because the record's job type differs."""
    ids = sorted({event.job_id for event in written})
    rows = connection.execute(
        sa.select(jobs.c.job_id, jobs.c.job_type).where(
            among(connection, jobs.c.job_id, ids)
        )
    )
    types: dict[str, str] = {job_id: job_type for job_id, job_type in rows}
    return [
        r.RefusedWrite(event.job_id, types[event.job_id], event.job_type)
        for event in written
        if types.get(event.job_id, event.job_type) != event.job_type
    ]


def _job_record(row: sa.RowMapping) -> r.JobRecord:
    result = row["result"]
    return r.JobRecord(
        job_id=row["job_id"],
        job_type=row["job_type"],
        queue=row["queue"],
        status=row["status"],
        attempts=row["attempts"],
        enqueued_at=row["enqueued_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        result=read_result(result),
        error=row["error"],
        progress=row["progress"],
        progress_message=row["progress_message"],
        updated_at=row["updated_at"],
        payload=read_result(row["payload"]),
    )


def _shape(event: r.JobEvent) -> str:
    """Which statement writes ``event``: one per set of columns it changes."""
    if event.status in (r.QUEUED, r.RUNNING, r.PROGRESS):
        return event.status
    return _SETTLED


def _row(event: r.JobEvent) -> dict[str, t.Any]:
    row = {name: getattr(event, name, None) for name in _COLUMNS}
    row.update(status=event.written_status, updated_at=event.at)
    return row


def _rank(status: t.Any) -> t.Any:
    """``status``'s rank (``STATUS_RANK``) in SQL constants: as bound parameters
    the ranks would be processed again for each row of an ``executemany``."""
    return sa.case(
        *(
            (status == _literal(name), sa.literal_column(str(rank), sa.Integer()))
            for name, rank in sorted(r.STATUS_RANK.items())
        ),
        else_=sa.literal_column("0", sa.Integer()),
    )


def _upsert(insert: t.Any, shape: str, restart: bool) -> t.Any:
    """The upsert of one shape, for ``executemany``: every value from the row."""
    stmt = insert(jobs)
    new = stmt.excluded
    changes: dict[str, t.Any] = {
        "queue": new.queue,
        "status": new.status,
        "attempts": new.attempts,
        "updated_at": new.updated_at,
        "enqueued_at": sa.func.coalesce(jobs.c.enqueued_at, new.enqueued_at),
    }
    if shape == r.PROGRESS:
        changes.update(progress=new.progress, progress_message=new.progress_message)
    elif shape == r.RUNNING:
        changes.update(
            started_at=new.started_at,
            finished_at=None,
            result=None,
            error=None,
            payload=None,
            progress=new.progress,
            progress_message=new.progress_message,
        )
    elif shape != r.QUEUED:
        changes.update(
            started_at=sa.func.coalesce(jobs.c.started_at, new.started_at),
            finished_at=new.finished_at,
            # A duplicate delivery keeps the result of the run it duplicates.
            result=sa.case(
                (
                    new.status == _literal(r.DUPLICATE),
                    sa.func.coalesce(new.result, jobs.c.result),
                ),
                else_=new.result,
            ),
            error=new.error,
            payload=new.payload,
            progress=sa.func.coalesce(new.progress, jobs.c.progress),
            progress_message=sa.case(
                (new.progress.is_(None), jobs.c.progress_message),
                else_=new.progress_message,
            ),
        )
    newer = sa.or_(
        jobs.c.attempts < new.attempts,
        sa.and_(
            jobs.c.attempts == new.attempts,
            _rank(jobs.c.status) <= _rank(new.status),
        ),
    )
    # Literal constants: an expanding IN cannot be used with executemany.
    unfinished = sa.and_(*(jobs.c.status != _literal(each) for each in sorted(r.FINAL)))
    applies: sa.ColumnElement[bool] = sa.and_(unfinished, newer)
    if restart:
        restarting = (jobs.c.status == _literal(each) for each in sorted(r.RESTARTING))
        applies = sa.or_(applies, *restarting)
    upsert = stmt.on_conflict_do_update(
        index_elements=[jobs.c.job_id],
        set_=changes,
        where=sa.and_(jobs.c.job_type == new.job_type, applies),
    )
    if shape == _SETTLED:
        return upsert.returning(jobs.c.queue, jobs.c.status, jobs.c.finished_at)
    return upsert


def _literal(status: str) -> sa.ColumnElement[t.Any]:
    return sa.literal_column(f"'{status}'")
