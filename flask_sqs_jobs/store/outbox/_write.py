"""The transactional outbox: jobs written in the caller's database transaction.

:func:`add_to_outbox` and :func:`add_many_to_outbox` take a job through the
engine's produce pipeline exactly as a send would (the same checks, the
produce middleware, the same body and attributes) into :class:`RowSink`,
which inserts it into ``sqs_jobs_outbox`` through the caller's session:
nothing reaches SQS before the commit. The rows are held in the session's
transaction (:class:`~._after_commit.AfterCommit`) and handed to this
process's sender (:mod:`._immediate`) by the outermost commit; a rollback
forgets them. The relay sends whatever the sender did not.

The session must be on the store's database: the rows are written through
it, and the relay reads them through the store's engine.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t
import weakref

import sqlalchemy as sa
import sqlalchemy.orm

from ...engine import QueueGroup
from ...engine.model import JSONObject
from ...engine.producing import JobSpec
from ...engine.producing import prepare_batch
from ...engine.producing import prepare_job
from ...engine.producing import PreparedJob
from ...engine.producing import produce
from ...engine.producing import Sink
from ...engine.producing import StagedMessage
from ...engine.producing import target_queue
from ..sql import outbox_table
from . import _rows as _outbox_rows
from ._after_commit import AfterCommit
from ._after_commit import AnySession
from ._after_commit import session_of
from ._debounce import write_debounced
from ._immediate import sender_for
from ._notify import notify_relays

#: The store's own engine per queue group, for the sends after commit.
_store_engines: weakref.WeakKeyDictionary[QueueGroup, sa.Engine] = (
    weakref.WeakKeyDictionary()
)
_INSERT_RELAYED = sa.insert(outbox_table)  # the relays read the ids
_INSERT_ONE = sa.insert(outbox_table).returning(outbox_table.c.id)
_INSERT_MANY = sa.insert(outbox_table).returning(
    outbox_table.c.id, sort_by_parameter_order=True
)

#: What a commit hands the sender: the engine to delete the rows through,
#: the group to send them with, and the rows.
_Written: t.TypeAlias = tuple[sa.Engine, QueueGroup, list[_outbox_rows.OutboxRow]]


def _submit(written: list[_Written]) -> None:
    """Hand a commit's rows to this process's sender for their engine and group.

    Runs inside the app's ``commit()``, after the database committed; it
    only queues the rows (the sending happens on the sender's thread), so
    the commit returns without waiting for SQS.
    """
    for engine, group, rows in written:
        sender_for(engine, group).submit(rows)


#: Rows written in a transaction, handed to the sender by its outermost commit.
send_after_commit: AfterCommit[_Written] = AfterCommit("outbox", _submit)


def send_through(
    group: QueueGroup,
    engine: sa.Engine,
    *,
    max_attempts: int = _outbox_rows.DEFAULT_MAX_ATTEMPTS,
) -> None:
    """Send ``group``'s rows after each commit through ``engine`` (the store's).

    Without it the session's own engine is used. On SQLite the store's engine
    commits without waiting for the disk (WAL, ``synchronous=NORMAL``), so the
    deletes after each send hold the database's write lock only briefly.
    ``max_attempts`` (``SQS_JOBS_OUTBOX_MAX_ATTEMPTS``): the failed sends
    after which a row is parked.
    """
    _store_engines[group] = engine
    _outbox_rows.set_max_attempts(group, max_attempts)


def add_to_outbox(
    session: AnySession,
    group: QueueGroup,
    queue: str,
    job_type: str,
    payload: JSONObject | None = None,
    *,
    send_after_commit: bool = True,
    **enqueue_options: t.Any,
) -> str:
    """Write one job into the outbox in ``session``'s transaction; return its job id.

    ``enqueue_options`` are those of :meth:`QueueGroup.enqueue`
    (``correlation_fields``, ``job_id``, ``message_group_id``, ...). On a FIFO
    queue the job id is the MessageDeduplicationId unless one is given.
    ``send_after_commit=False`` leaves the send to the relays (woken at the
    commit on PostgreSQL), so the commit costs this process nothing more.

    :raises TypeError, ValueError: the job is wrong, as :meth:`QueueGroup.enqueue`
        would say; nothing was written.
    """
    queue, sqs_queue, options = target_queue(group, queue, enqueue_options)
    prepared = prepare_job(
        sqs_queue, queue, job_type, payload, options, job_id_deduplicates=True
    )
    sink = RowSink(session, group, send_after_commit=send_after_commit)
    return produce(group, [prepared], sink)[0]


def add_many_to_outbox(
    session: AnySession,
    group: QueueGroup,
    queue: str,
    jobs: cabc.Iterable[JobSpec],
    *,
    send_after_commit: bool = True,
) -> list[str]:
    """Write many jobs into the outbox in one INSERT; return their job ids in order.

    Each job is what :meth:`QueueGroup.enqueue_many` takes; every job is
    checked before any row is written. ``send_after_commit`` is
    :func:`add_to_outbox`'s.
    """
    prepared = prepare_batch(group, queue, jobs, job_id_deduplicates=True)
    if not prepared:
        return []
    sink = RowSink(session, group, send_after_commit=send_after_commit)
    return produce(group, prepared, sink)


class RowSink(Sink):
    """The outbox's sink: each staged message becomes a row, inserted in one go.

    Contract: made for one ``add_to_outbox`` / ``add_many_to_outbox`` call and
    used by the produce pipeline in the caller's thread. :meth:`send` keeps the
    row's values and returns the job id (the message is not on its way yet,
    so the pipeline reports nothing: the sender and the relay report it when
    they send the row); :meth:`finish`, once every chain returned, inserts
    the rows through the caller's session and holds them for the send after
    the outermost commit (or, with ``send_after_commit=False``, notifies the
    relays, whose rows they are at once). A chain that raises leaves nothing
    written.
    """

    enqueues = False
    debounces = True

    def __init__(
        self, session: AnySession, group: QueueGroup, *, send_after_commit: bool = True
    ) -> None:
        self._session = session_of(session)
        self._group = group
        self._send_after_commit = send_after_commit
        self._now = dt.datetime.now(dt.UTC)
        self._rows: list[dict[str, t.Any]] = []
        #: Job id -> (key, seconds) of each debounced job of the call.
        self._debounced: dict[str, tuple[str, float]] = {}
        self._debounced_rows: list[tuple[dict[str, t.Any], str, float]] = []

    @property
    def key_session(self) -> sa.orm.Session:
        """Unique keys are taken in the caller's transaction, with the rows."""
        return self._session

    def admit(self, prepared: PreparedJob) -> PreparedJob:
        """Note a debounced job's key: its row is upserted, not inserted."""
        unique = prepared.unique
        if unique is not None and unique.debounce is not None:
            job = prepared.job
            key = unique.key_for(job.job_type, job.payload)
            self._debounced[t.cast(str, job.job_id)] = (key, unique.debounce)
        return prepared

    def send(self, message: StagedMessage) -> str:
        """Keep ``message`` as the columns of a new row; return its job id."""
        job = message.job
        job_id = t.cast(str, job.job_id)  # staging checked it
        values = _outbox_rows.row_values(
            job.queue,
            job_id,
            job.job_type,
            message.params,
            self._now,
            grace=self._send_after_commit,
        )
        debounced = self._debounced.get(job_id)
        if debounced is not None:
            self._debounced_rows.append((values, *debounced))
        else:
            self._rows.append(values)
        return job_id

    def finish(self) -> None:
        """Insert the call's rows (one INSERT) and hold them until the commit
        (or notify the relays).

        The send after commit goes through the store's engine when
        :func:`send_through` named one, else the session's own.
        """
        rows, session = self._rows, self._session
        for values, key, seconds in self._debounced_rows:
            write_debounced(session, values, key, seconds, self._now)
        if not rows:
            return
        if not self._send_after_commit:
            session.execute(_INSERT_RELAYED, rows)
            notify_relays(session)
            return
        if len(rows) == 1:  # the common case, without executemany's overhead
            ids = [session.execute(_INSERT_ONE, rows[0]).scalar_one()]
        else:
            ids = list(session.execute(_INSERT_MANY, rows).scalars())
        written = [
            _outbox_rows.OutboxRow.of(row_id, values)
            for row_id, values in zip(ids, rows, strict=True)
        ]
        engine = _store_engines.get(self._group) or session.connection().engine
        send_after_commit.hold(session, (engine, self._group, written))
