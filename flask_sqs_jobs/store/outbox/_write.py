"""The transactional outbox: jobs written in the caller's database transaction.

:func:`add_to_outbox` validates and encodes a job exactly as a send would
(produce middleware included) and inserts it into ``sqs_jobs_outbox``
through the caller's session; nothing reaches SQS before the commit. After
the commit the rows are sent at once by a background thread (best effort);
a rollback forgets them. The relay sends whatever that did not.

The session must be on the store's database: the rows are written through
it, and the relay reads them through the store's engine.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t
import weakref

import sqlalchemy as sa
import sqlalchemy.event
import sqlalchemy.orm

from ...engine import QueueGroup
from ...engine.model import check_job_id
from ...engine.model import check_single_trace_injector
from ...engine.model import compose_produce
from ...engine.model import Job
from ...engine.model import JSONObject
from ...engine.producing import check_correlation_fields
from ...engine.producing import check_job_type
from ...engine.producing import check_options
from ...engine.producing import check_payload
from ...engine.producing import JobSpec
from ...engine.producing import prepare_job
from ...engine.producing import SendOptions
from ...engine.producing import stage_job
from ...engine.sqs import SqsQueue
from ..sql import outbox_table
from . import _rows as _outbox_rows
from ._immediate import sender_for

AnySession: t.TypeAlias = sa.orm.Session | sa.orm.scoped_session[t.Any]

_PENDING = "flask_sqs_jobs.outbox_pending"
#: The store's own engine per queue group, for the sends after commit.
_store_engines: weakref.WeakKeyDictionary[QueueGroup, sa.Engine] = (
    weakref.WeakKeyDictionary()
)
_INSERT_ONE = sa.insert(outbox_table).returning(outbox_table.c.id)
_INSERT_MANY = sa.insert(outbox_table).returning(
    outbox_table.c.id, sort_by_parameter_order=True
)


def send_through(group: QueueGroup, engine: sa.Engine) -> None:
    """Send ``group``'s rows after each commit through ``engine`` (the store's).

    Without it the session's own engine is used. On SQLite the store's engine
    commits without waiting for the disk (WAL, ``synchronous=NORMAL``), so the
    deletes after each send hold the database's write lock only briefly.
    """
    _store_engines[group] = engine


def add_to_outbox(
    session: AnySession,
    group: QueueGroup,
    queue: str,
    job_type: str,
    payload: JSONObject | None = None,
    **enqueue_options: t.Any,
) -> str:
    """Write one job into the outbox in ``session``'s transaction; return its job id.

    ``enqueue_options`` are those of :meth:`QueueGroup.enqueue`
    (``correlation_fields``, ``job_id``, ``message_group_id``, ...). On a FIFO
    queue the job id is the MessageDeduplicationId unless one is given.

    :raises TypeError, ValueError: the job is wrong, as :meth:`QueueGroup.enqueue`
        would say; nothing was written.
    """
    sqs_queue = group.queue(queue)
    options = dict(enqueue_options)
    job_id = check_job_id(options.pop("job_id", None))
    job = Job(
        job_type=check_job_type(job_type),
        payload=check_payload(payload),
        queue=queue,
        correlation_fields=check_correlation_fields(
            options.pop("correlation_fields", None)
        ),
        job_id=job_id,
    )
    _default_deduplication(sqs_queue, options, job_id)
    send_options = check_options(sqs_queue, queue, options)
    return _write(session, group, sqs_queue, [(job, send_options)])[0]


def add_many_to_outbox(
    session: AnySession, group: QueueGroup, queue: str, jobs: cabc.Iterable[JobSpec]
) -> list[str]:
    """Write many jobs into the outbox in one INSERT; return their job ids in order.

    Each job is what :meth:`QueueGroup.enqueue_many` takes; every job is
    checked before any row is written.
    """
    sqs_queue = group.queue(queue)
    prepared = [
        prepare_job(sqs_queue, queue, i, _with_deduplication(sqs_queue, spec))
        for i, spec in enumerate(jobs)
    ]
    return _write(session, group, sqs_queue, prepared) if prepared else []


def _default_deduplication(
    queue: SqsQueue, options: dict[str, t.Any], job_id: str
) -> None:
    if queue.is_fifo and options.get("message_deduplication_id") is None:
        options["message_deduplication_id"] = job_id


def _with_deduplication(queue: SqsQueue, spec: object) -> object:
    """A FIFO job spec with its job id fixed now, so it can deduplicate."""
    if not queue.is_fifo:
        return spec
    if isinstance(spec, tuple) and len(spec) == 2:
        spec = {"job_type": spec[0], "payload": spec[1]}
    if not isinstance(spec, cabc.Mapping):
        return spec  # prepare_job says what is wrong with it
    options = dict(spec)
    options["job_id"] = check_job_id(options.get("job_id"))
    _default_deduplication(queue, options, options["job_id"])
    return options


def _write(
    session: AnySession,
    group: QueueGroup,
    queue: SqsQueue,
    prepared: list[tuple[Job, SendOptions]],
) -> list[str]:
    """Run each job's produce chain into a row; insert the rows; send after commit."""
    check_single_trace_injector(group.middleware)
    now = dt.datetime.now(dt.UTC)
    rows: list[dict[str, t.Any]] = []
    results: list[str] = []
    for job, options in prepared:

        def stage(job: Job, options: SendOptions = options) -> str:
            params = stage_job(queue, job, options)
            job_id = t.cast(str, job.job_id)  # stage_job checked it
            rows.append(
                _outbox_rows.row_values(job.queue, job_id, job.job_type, params, now)
            )
            return job_id

        results.append(compose_produce(group.middleware, stage)(job))
    target = session() if isinstance(session, sa.orm.scoped_session) else session
    if rows:
        if len(rows) == 1:  # the common case, without executemany's overhead
            ids = [target.execute(_INSERT_ONE, rows[0]).scalar_one()]
        else:
            ids = list(target.execute(_INSERT_MANY, rows).scalars())
        written = [
            _outbox_rows.OutboxRow.of(row_id, values)
            for row_id, values in zip(ids, rows, strict=True)
        ]
        _send_after_commit(target, group, written)
    return results


def _send_after_commit(
    session: sa.orm.Session, group: QueueGroup, rows: list[_outbox_rows.OutboxRow]
) -> None:
    engine = _store_engines.get(group) or session.connection().engine
    pending: list[_Pending] = session.info.setdefault(_PENDING, [])
    pending.append((engine, group, rows, session.get_nested_transaction()))
    if not sa.event.contains(session, "after_commit", _on_commit):
        sa.event.listen(session, "after_commit", _on_commit)
        sa.event.listen(session, "after_soft_rollback", _on_rollback)
        sa.event.listen(session, "after_transaction_end", _on_transaction_end)


#: What a commit sends: the engine, the group, the rows, and the savepoint
#: they were written in (None: the transaction itself).
_Pending: t.TypeAlias = tuple[
    sa.Engine,
    QueueGroup,
    list[_outbox_rows.OutboxRow],
    sa.orm.SessionTransaction | None,
]


def _on_commit(session: sa.orm.Session) -> None:
    for engine, group, rows, _ in session.info.pop(_PENDING, []):
        sender_for(engine, group).submit(rows)


def _on_rollback(session: sa.orm.Session, previous: sa.orm.SessionTransaction) -> None:
    """Forget the rows of a savepoint rolled back (and of those inside it)."""
    if not previous.nested or _PENDING not in session.info:
        return
    session.info[_PENDING] = [
        entry for entry in session.info[_PENDING] if not _within(entry[3], previous)
    ]


def _within(
    savepoint: sa.orm.SessionTransaction | None, ended: sa.orm.SessionTransaction
) -> bool:
    while savepoint is not None:
        if savepoint is ended:
            return True
        savepoint = savepoint.parent
    return False


def _on_transaction_end(
    session: sa.orm.Session, transaction: sa.orm.SessionTransaction
) -> None:
    # The outermost transaction ended without a commit (a rollback, or a
    # close): its rows are gone, so forget them.
    if transaction.parent is None:
        session.info.pop(_PENDING, None)
