"""Unique jobs' keys in the ``sqs_jobs_unique_keys`` table (SQLite, PostgreSQL).

A take is one atomic upsert on the key's primary key: ``INSERT ... ON
CONFLICT DO UPDATE ... WHERE`` the existing row's time is up, ``RETURNING``
the job id, so of any number of enqueues racing for a key exactly one gets
it (PostgreSQL's unique index makes the others wait for its transaction,
SQLite's write lock serialises them). A refused take reads the holder's job
id. A release deletes the row only while the releasing job holds it.

The table is defined here, on the store's ``MetaData``, so
``create_tables`` and Alembic's ``target_metadata`` include it. Times are
this process's UTC clock, passed to each statement (keep clocks in sync).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import datetime as dt
import typing as t

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite
import sqlalchemy.orm

from ._tables import metadata
from ._tables import one_statement
from ._tables import UTCDateTime

#: One row per held key; a row past ``expires_at`` is free to take over.
unique_keys = sa.Table(
    "sqs_jobs_unique_keys",
    metadata,
    #: ``<job type>:<key>`` (``unique=True``: ``<job type>:payload:<sha256>``).
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("job_id", sa.String(128), nullable=False),
    #: When the key is free whatever its job did (``unique_for`` after the take).
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("sqs_jobs_unique_keys_expires_at", "expires_at"),
)

#: A take that finds the row gone again (released in between) tries again.
_TAKE_ATTEMPTS = 5


def _param(name: str, column: sa.Column[t.Any]) -> sa.BindParameter[t.Any]:
    return sa.bindparam(f"p_{name}", type_=column.type)


_c = unique_keys.c
_FIND = sa.select(_c.job_id).where(_c.key == _param("key", _c.key))
_RELEASE = sa.delete(unique_keys).where(
    _c.key == _param("key", _c.key), _c.job_id == _param("job_id", _c.job_id)
)


def _take_statement(dialect: str) -> sa.Executable:
    """Insert the key, or take over its row when the row's time is up."""
    if dialect not in ("postgresql", "sqlite"):
        raise RuntimeError(
            f"unique jobs need SQLite or PostgreSQL; this store is on {dialect}"
        )
    insert: t.Any = (
        sa.dialects.postgresql.insert(unique_keys)
        if dialect == "postgresql"
        else sa.dialects.sqlite.insert(unique_keys)
    )
    now = _param("now", _c.created_at)
    statement = insert.values(
        key=_param("key", _c.key),
        job_id=_param("job_id", _c.job_id),
        expires_at=_param("expires_at", _c.expires_at),
        created_at=now,
    )
    return t.cast(
        sa.Executable,
        statement.on_conflict_do_update(
            index_elements=[_c.key],
            set_={
                name: statement.excluded[name]
                for name in ("job_id", "expires_at", "created_at")
            },
            where=_c.expires_at <= now,
        ).returning(_c.job_id),
    )


class SQLUniqueKeys:
    """The engine's ``UniqueKeys`` in SQL.

    Made by :meth:`SQLAlchemyStore.unique_keys`; called by the produce
    pipeline in the enqueuing thread and by the worker's hooks on a job's
    thread, with no lock: each statement is atomic on its own. Without a
    session each call is one short transaction on the store's engine; with
    one, its statements join the caller's transaction.
    """

    def __init__(self, engine: t.Callable[[], sa.Engine]) -> None:
        self._engine = engine
        self._take: sa.Executable | None = None

    def take(
        self, key: str, job_id: str, *, hold_seconds: float, session: t.Any = None
    ) -> str | None:
        """Take ``key`` for ``job_id``; None when taken, else the holder's job id.

        :raises RuntimeError: the row changed under all 5 attempts, or the
            database is neither SQLite nor PostgreSQL.
        """
        if self._take is None:
            self._take = _take_statement(self._engine().dialect.name)
        for _ in range(_TAKE_ATTEMPTS):
            now = dt.datetime.now(dt.UTC)
            params = {
                "p_key": key,
                "p_job_id": job_id,
                "p_now": now,
                "p_expires_at": now + dt.timedelta(seconds=hold_seconds),
            }
            if session is not None:
                holder = _take_in(t.cast(sa.orm.Session, session), self._take, params)
            else:
                with self._connect() as connection:
                    holder = _take_in(connection, self._take, params)
            if holder != "":
                return holder
        raise RuntimeError(
            f"unique key {key!r} kept changing while being taken; gave up after"
            f" {_TAKE_ATTEMPTS} attempts"
        )

    def release(self, key: str, job_id: str, *, session: t.Any = None) -> None:
        """Delete the key's row if ``job_id`` holds it: one ``DELETE``."""
        params = {"p_key": key, "p_job_id": job_id}
        if session is not None:
            t.cast(sa.orm.Session, session).execute(_RELEASE, params)
            return
        with self._connect() as connection:
            connection.execute(_RELEASE, params)

    def release_many(self, pairs: cabc.Sequence[tuple[str, str]]) -> None:
        """:meth:`release` for each ``(key, job_id)``: one ``DELETE`` for them all."""
        if not pairs:
            return
        held = sa.or_(*(sa.and_(_c.key == k, _c.job_id == j) for k, j in pairs))
        with self._connect() as connection:
            connection.execute(sa.delete(unique_keys).where(held))

    def _connect(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """A connection for one statement, atomic on its own."""
        return one_statement(self._engine())

    def forget_expired(self, limit: int = 1000) -> int:
        """Delete up to ``limit`` rows whose time is up; return how many."""
        now = dt.datetime.now(dt.UTC)
        expired = (
            sa.select(_c.key).where(_c.expires_at <= now).limit(limit).scalar_subquery()
        )
        with self._engine().begin() as connection:
            deleted = connection.execute(
                sa.delete(unique_keys).where(_c.key.in_(expired), _c.expires_at <= now)
            )
            return int(deleted.rowcount)


def _take_in(
    where: sa.Connection | sa.orm.Session,
    statement: sa.Executable,
    params: dict[str, t.Any],
) -> str | None:
    """One take: None when ours, the holder's job id, or "" when the row vanished."""
    taken = where.execute(statement, params).scalar()
    if taken == params["p_job_id"]:
        return None
    holder = where.execute(_FIND, {"p_key": params["p_key"]}).scalar()
    return "" if holder is None else str(holder)
