"""What operators see of the outbox and do with it: status, list, park, retry, drop.

Behind ``flask sqs-jobs outbox status|list|park|retry|drop`` and the
metrics. Each function runs in its caller's transaction and says what it
costs; none holds a lock longer than its own statement.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from ._rows import outbox
from ._rows import park
from ._rows import PARKED_UNTIL


@dataclasses.dataclass(frozen=True)
class QueueStatus:
    """One logical queue's rows in the outbox, for ``outbox status`` and metrics.

    ``pending`` and ``failing`` count rows still to be sent (``failing``: those
    whose last send failed); ``parked`` those the relay no longer sends.
    """

    queue: str
    pending: int
    oldest_age_seconds: float
    failing: int
    parked: int = 0


def status(connection: sa.Connection) -> list[QueueStatus]:
    """Pending rows per logical queue, with the oldest's age, those failing, parked.

    Cost: one aggregate over the whole table (a sequential scan); the metrics
    read it at most once a second per process.
    """
    now = dt.datetime.now(dt.UTC)
    live = outbox.c.parked_at.is_(None)
    query = (
        sa.select(
            outbox.c.queue,
            sa.func.sum(sa.case((live, 1), else_=0)),
            sa.func.min(sa.case((live, outbox.c.created_at), else_=None)),
            sa.func.sum(sa.case((sa.and_(live, outbox.c.attempts > 0), 1), else_=0)),
            sa.func.sum(sa.case((live, 0), else_=1)),
        )
        .group_by(outbox.c.queue)
        .order_by(outbox.c.queue)
    )
    result: list[QueueStatus] = []
    for queue, pending, oldest, failing, parked in connection.execute(query):
        if isinstance(oldest, str):  # SQLite's MIN over a CASE loses the type
            oldest = dt.datetime.fromisoformat(oldest).replace(tzinfo=dt.UTC)
        age = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        result.append(
            QueueStatus(
                queue, int(pending or 0), age, int(failing or 0), int(parked or 0)
            )
        )
    return result


@dataclasses.dataclass(frozen=True)
class OutboxEntry:
    """One row as ``outbox list`` shows it (every text as stored: escape to show)."""

    id: int
    queue: str
    job_id: str
    job_type: str
    message_group_id: str | None
    #: ``parked``, ``blocked`` (behind a parked row of its group), ``held``
    #: (by a send after commit), ``backing_off``, ``waiting`` (its grace
    #: period, or an earlier row of its group) or ``due``.
    state: str
    attempts: int
    created_at: dt.datetime
    available_at: dt.datetime | None
    parked_at: dt.datetime | None
    last_error: str | None

    def as_dict(self) -> dict[str, t.Any]:
        """JSON-ready fields (times as ISO 8601)."""
        fields = dataclasses.asdict(self)
        for name in ("created_at", "available_at", "parked_at"):
            value = fields[name]
            fields[name] = value.isoformat() if value is not None else None
        return fields


def list_rows(
    connection: sa.Connection, *, parked: bool = False, limit: int = 100
) -> list[OutboxEntry]:
    """The oldest ``limit`` rows (with ``parked``, parked rows only), oldest first.

    Cost: a primary-key scan stopping after ``limit`` rows; parked rows are
    a range of the index ``(available_at, id)``.
    """
    columns = [c for c in outbox.c if c.name not in ("body", "message_attributes")]
    query = sa.select(*columns).order_by(outbox.c.id).limit(limit)
    if parked:
        query = query.where(
            outbox.c.available_at >= PARKED_UNTIL, outbox.c.parked_at.is_not(None)
        )
    now = dt.datetime.now(dt.UTC)
    return [_entry(record, now) for record in connection.execute(query).mappings()]


def _entry(record: t.Mapping[t.Any, t.Any], now: dt.datetime) -> OutboxEntry:
    available_at = record["available_at"]
    if record["parked_at"] is not None or available_at >= PARKED_UNTIL:
        state = "parked" if record["parked_at"] is not None else "blocked"
        available_at = None
    elif record["leased_until"] is not None and record["leased_until"] > now:
        state = "held"
    elif available_at > now:
        state = "backing_off" if record["attempts"] else "waiting"
    else:
        state = "due"
    return OutboxEntry(
        id=record["id"],
        queue=record["queue"],
        job_id=record["job_id"],
        job_type=record["job_type"],
        message_group_id=record["message_group_id"],
        state=state,
        attempts=record["attempts"],
        created_at=record["created_at"],
        available_at=available_at,
        parked_at=record["parked_at"],
        last_error=record["last_error"],
    )


def park_rows(connection: sa.Connection, ids: t.Collection[int]) -> list[int]:
    """Park the rows ``ids`` by hand, keeping their last error; return those found.

    A row being sent at this moment may still go (PostgreSQL: this waits for
    the relay's lock, and the sent row is then gone). Cost: one update by
    primary key.
    """
    return park(connection, dict.fromkeys(ids))


def retry_rows(
    connection: sa.Connection,
    ids: t.Collection[int] | None = None,
    *,
    all_parked: bool = False,
) -> list[int]:
    """Put rows back to be sent now, attempts reset; return their ids.

    ``ids``: those rows, parked or not, except a row whose send is under way
    (on SQLite a send after commit leases its rows while they travel: freeing
    the row then would let the relay send it a second time; see
    :func:`being_sent`); ``all_parked``: every parked row (a range of the
    index ``(available_at, id)``). The rows that parked rows held back come
    back too (the next claim holds back again those still behind one). The
    last error stays until the next send. Cost: two updates over that range.
    """
    now = dt.datetime.now(dt.UTC)
    update = sa.update(outbox).values(
        parked_at=None, leased_until=None, attempts=0, available_at=now
    )
    if all_parked:
        update = update.where(
            outbox.c.available_at >= PARKED_UNTIL, outbox.c.parked_at.is_not(None)
        )
    elif ids:
        update = update.where(outbox.c.id.in_(list(ids)), sa.not_(_leased(now)))
    else:
        return []
    retried = sorted(connection.execute(update.returning(outbox.c.id)).scalars())
    _release_held_back(connection, now)
    return retried


def _release_held_back(connection: sa.Connection, now: dt.datetime) -> None:
    """Rows held back behind parked rows are due again (the claim sorts them)."""
    connection.execute(
        sa.update(outbox)
        .where(outbox.c.available_at >= PARKED_UNTIL, outbox.c.parked_at.is_(None))
        .values(available_at=now)
    )


def drop_rows(connection: sa.Connection, ids: t.Collection[int]) -> list[int]:
    """Delete the parked rows among ``ids`` (their jobs are never sent); return them.

    A row that is not parked is left alone: park it first. The rows that the
    dropped ones held back come back. Cost: one delete by primary key, one
    update over the range of held-back rows.
    """
    if not ids:
        return []
    result = connection.execute(
        sa.delete(outbox)
        .where(outbox.c.id.in_(list(ids)), outbox.c.parked_at.is_not(None))
        .returning(outbox.c.id)
    )
    dropped = sorted(result.scalars())
    if dropped:
        _release_held_back(connection, dt.datetime.now(dt.UTC))
    return dropped


def being_sent(connection: sa.Connection, ids: t.Collection[int]) -> list[int]:
    """The rows among ``ids`` whose send is under way (leased), which
    :func:`retry_rows` leaves alone. Cost: a key lookup."""
    now = dt.datetime.now(dt.UTC)
    query = sa.select(outbox.c.id).where(outbox.c.id.in_(list(ids)), _leased(now))
    return sorted(connection.execute(query).scalars())


def _leased(now: dt.datetime) -> sa.ColumnElement[bool]:
    return sa.and_(outbox.c.leased_until.is_not(None), outbox.c.leased_until > now)


def find_rows(connection: sa.Connection, ids: t.Collection[int]) -> dict[int, bool]:
    """``id -> parked?`` for the rows among ``ids`` that exist. Cost: a key lookup."""
    query = sa.select(outbox.c.id, outbox.c.parked_at).where(outbox.c.id.in_(list(ids)))
    return {row_id: parked is not None for row_id, parked in connection.execute(query)}
