"""``jobs.enqueue(..., session=)``: the Flask side of the transactional outbox."""

from __future__ import annotations

import collections.abc as cabc
import functools
import os
import typing as t
import weakref

import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask

from .engine.model import JSONObject
from .engine.producing import JobSpec
from .engine.producing import read_job_specs
from .store.outbox import AfterCommit

if t.TYPE_CHECKING:
    from ._jobs_facade import JobsFacade
    from .store.sql import SQLAlchemyStore


def _run_all(calls: list[cabc.Callable[[], object]]) -> None:
    for call in calls:
        call()


#: Eager mode has no outbox: its enqueues run when the outermost commit comes.
run_eager_after_commit: AfterCommit[cabc.Callable[[], object]] = AfterCommit(
    "eager outbox", _run_all
)

#: Engines already checked to be on the store's database.
_checked: weakref.WeakKeyDictionary[sa.Engine, sa.Engine] = weakref.WeakKeyDictionary()


def outbox_store(jobs: JobsFacade, app: Flask | None = None) -> SQLAlchemyStore:
    """The app's store, if it can hold the outbox (see ``AppParts.outbox_store``)."""
    return jobs.parts(app).outbox_store()


def enqueue_in_session(
    jobs: JobsFacade,
    session: t.Any,
    queue: str,
    job_type: str,
    payload: JSONObject | None,
    options: dict[str, t.Any],
) -> str:
    """See :meth:`SQSJobs.enqueue` with ``session=``."""
    from ._producing import _with_request_id
    from .store.outbox import add_to_outbox
    from .store.outbox import send_through

    target = _session_of(session)
    state = jobs.parts()
    options["correlation_fields"] = _with_request_id(
        options.get("correlation_fields"), state.config.request_id_header
    )
    send_now = _sends_after_commit(jobs, options.pop("send_after_commit", None))
    if state.config.eager:
        from .engine.model import check_job_id

        options["job_id"] = check_job_id(options.get("job_id"))
        call = functools.partial(jobs.enqueue, queue, job_type, payload, **options)
        run_eager_after_commit.hold(target, call)
        return t.cast(str, options["job_id"])
    store = outbox_store(jobs)
    _check_database(target, store)
    group = jobs.queue_group()
    send_through(group, store.engine, max_attempts=state.config.outbox_max_attempts)
    return add_to_outbox(
        target, group, queue, job_type, payload, send_after_commit=send_now, **options
    )


def enqueue_debounced(
    jobs: JobsFacade,
    session: t.Any,
    queue: str,
    job_type: str,
    payload: JSONObject | None,
    options: dict[str, t.Any],
) -> str:
    """See :meth:`SQSJobs.enqueue` with ``debounce=``: an outbox row whose send
    time each enqueue with the key moves (``store/outbox/_debounce.py``).

    Without ``session`` the row is written in a transaction of its own on the
    store's database. Eager mode runs every job at once, so there it runs the
    job now, without debounce or key.
    """
    if jobs.config().eager:
        for name in (
            "debounce",
            "unique_key",
            "unique_for",
            "unique_until",
            "send_after_commit",
        ):
            options.pop(name, None)
        enqueue: t.Any = jobs.enqueue
        return str(enqueue(queue, job_type, payload, session=session, **options))
    if session is not None:
        return enqueue_in_session(jobs, session, queue, job_type, payload, options)
    with outbox_store(jobs).session() as own:
        job_id = enqueue_in_session(jobs, own, queue, job_type, payload, options)
        own.commit()
    return job_id


def enqueue_many_in_session(
    jobs: JobsFacade,
    session: t.Any,
    queue: str,
    specs: cabc.Sequence[JobSpec],
    send_after_commit: bool | None = None,
) -> list[str]:
    """See :meth:`SQSJobs.enqueue_many` with ``session=``."""
    from .store.outbox import add_many_to_outbox
    from .store.outbox import send_through

    target = _session_of(session)
    config = jobs.config()
    if config.eager:
        dicts = _job_dicts(specs)
        call = functools.partial(jobs.enqueue_many, queue, dicts)
        run_eager_after_commit.hold(target, call)
        return [d["job_id"] for d in dicts]
    store = outbox_store(jobs)
    _check_database(target, store)
    group = jobs.queue_group()
    send_through(group, store.engine, max_attempts=config.outbox_max_attempts)
    send_now = _sends_after_commit(jobs, send_after_commit)
    return add_many_to_outbox(target, group, queue, specs, send_after_commit=send_now)


def _sends_after_commit(jobs: JobsFacade, given: bool | None) -> bool:
    """``send_after_commit`` as given, else ``SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT``."""
    return jobs.config().outbox_send_after_commit if given is None else given


def _session_of(session: t.Any) -> sa.orm.Session:
    if isinstance(session, sa.orm.scoped_session):
        return t.cast(sa.orm.Session, session())
    if isinstance(session, sa.orm.Session):
        return session
    raise TypeError(
        "session must be a SQLAlchemy Session or scoped_session (Flask-SQLAlchemy's"
        f" db.session); got {type(session).__name__}"
    )


def _check_database(session: sa.orm.Session, store: SQLAlchemyStore) -> None:
    """Refuse a session on another database than the store's: the relay reads there."""
    engine = session.get_bind()
    engine = engine.engine if isinstance(engine, sa.Connection) else engine
    if _checked.get(engine) is store.engine:
        return
    if _where(engine.url) != _where(store.engine.url):
        raise ValueError(
            "enqueue(..., session=) writes the job into the outbox table through the"
            " session, so the session must be on the job store's database; the"
            f" session is on {engine.url.render_as_string()}, the store on"
            f" {store.describe()}. Set SQS_JOBS_STORE_URL to the app's database"
            " (or pass SQSJobs(store=SQLAlchemyStore(db)))"
        )
    _checked[engine] = store.engine


def _where(url: sa.engine.URL) -> tuple[object, ...]:
    database = url.database
    if url.get_backend_name() == "sqlite" and database:
        database = os.path.realpath(database)
    return (url.get_backend_name(), url.host, url.port, database)


def _job_dicts(specs: cabc.Sequence[JobSpec]) -> list[dict[str, t.Any]]:
    """The specs as dicts with their job ids fixed (checked by enqueue_many later)."""
    from .engine.model import check_job_id

    dicts = read_job_specs(specs)
    for spec in dicts:
        spec["job_id"] = check_job_id(spec.get("job_id"))
    return dicts
