"""Tombstones of cancelled jobs in ``sqs_jobs_cancellations`` (SQLite, PostgreSQL).

A cancel is one ``INSERT ... ON CONFLICT DO NOTHING RETURNING``: two racing
cancels of one job write one row, and only the one that wrote it gets it
back. Workers read tombstones with one ``SELECT ... WHERE job_id IN (...)``
per call. Each cancel first deletes the tombstones older
than the retention, so the table holds only those a message may still need.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite

from ..model import TOMBSTONE_RETENTION_SECONDS
from ._tables import cancellations
from ._tables import reading

#: Ids per ``IN (...)`` list: well within SQLite's 999 bound parameters.
_IDS_PER_SELECT = 500


class SQLCancellations:
    """The store's ``Cancellations`` in SQL.

    Made by :meth:`SQLAlchemyStore.cancellations`; :meth:`cancel` is called
    from web processes and the CLI, :meth:`cancelled` from workers' job and
    watch threads, with no lock held: each call is one short transaction.
    """

    def __init__(self, engine: t.Callable[[], sa.Engine]) -> None:
        self._engine = engine

    def cancel(self, job_id: str) -> bool:
        """Write ``job_id``'s tombstone unless it has one; True when written now."""
        engine = self._engine()
        now = dt.datetime.now(dt.UTC)
        insert = (
            sqlalchemy.dialects.postgresql.insert
            if engine.dialect.name == "postgresql"
            else sqlalchemy.dialects.sqlite.insert
        )
        statement = (
            insert(cancellations)
            .values(job_id=job_id, cancelled_at=now)
            .on_conflict_do_nothing(index_elements=["job_id"])
            .returning(cancellations.c.job_id)
        )
        stale = now - dt.timedelta(seconds=TOMBSTONE_RETENTION_SECONDS)
        with engine.begin() as connection:
            connection.execute(
                sa.delete(cancellations).where(cancellations.c.cancelled_at < stale)
            )
            written = connection.execute(statement).first()
        return written is not None

    def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
        """The ids among ``job_ids`` that have a tombstone."""
        ids = list(dict.fromkeys(job_ids))
        found: set[str] = set()
        if not ids:
            return found
        with reading(self._engine()) as connection:
            for start in range(0, len(ids), _IDS_PER_SELECT):
                chunk = ids[start : start + _IDS_PER_SELECT]
                rows = connection.execute(
                    sa.select(cancellations.c.job_id).where(
                        cancellations.c.job_id.in_(chunk)
                    )
                )
                found.update(row[0] for row in rows)
        return found
