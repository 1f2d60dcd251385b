"""The SQL store a workflow lives in, and the transaction it is written in."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

if t.TYPE_CHECKING:
    from flask import Flask

    from ..store.sql import SQLAlchemyStore

T = t.TypeVar("T")


def sql_store(jobs: t.Any, what: str, app: Flask | None = None) -> SQLAlchemyStore:
    """The app's SQL store; a one-line ``RuntimeError`` when it has none."""
    from ..store.sql import SQLAlchemyStore

    store = jobs.parts(app).store
    if isinstance(store, SQLAlchemyStore):
        return store
    kind = "no job store" if store is None else f"a {type(store).__name__}"
    raise RuntimeError(
        f"{what} needs a SQL job store (SQLite or PostgreSQL): set"
        " SQS_JOBS_STORE_URL or pass SQSJobs(store=SQLAlchemyStore(...)); this"
        f" app has {kind}"
    )


def in_transaction(jobs: t.Any, session: t.Any, write: cabc.Callable[[t.Any], T]) -> T:
    """``write(session)``; without a session, in one of its own, committed."""
    store = sql_store(jobs, "a workflow")
    if session is not None:
        return write(session)
    with store.session() as own:
        done = write(own)
        own.commit()
    return done


def now() -> dt.datetime:
    """The time a workflow row is stamped with (UTC)."""
    return dt.datetime.now(dt.UTC)
