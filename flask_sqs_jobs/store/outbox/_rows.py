"""The outbox table's rows: claimed under row locks, deleted once sent, backed off.

PostgreSQL locks the claimed rows with ``FOR UPDATE SKIP LOCKED``, so
several relays share a backlog without sending a row twice. SQLite has no
row locks: each claim runs in a ``BEGIN IMMEDIATE`` transaction, which holds
the database's write lock, so relays take turns.

Every function here runs in its caller's transaction (a ``Connection`` the
caller began and commits): the claim, the send through the pipeline and the
write-back of one pass are one transaction, so what a crash interrupts is
rolled back and sent again by the next pass.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import typing as t

import sqlalchemy as sa

from ..sql import outbox_table

outbox = outbox_table

#: How long a freshly committed row is left to the immediate send after the
#: commit before the relay takes it.
GRACE_SECONDS = 3.0
#: How long the send after commit holds the rows it sends on SQLite, which has no
#: row locks: the relay leaves them alone until then, and takes them after a crash.
SEND_LEASE_SECONDS = 60.0
#: The longest back-off after a failed send.
MAX_BACKOFF_SECONDS = 60.0
#: How much of a send error is kept on the row.
MAX_ERROR_LENGTH = 2000


@dataclasses.dataclass(frozen=True)
class OutboxRow:
    """One job waiting in the outbox, as the relay sends it.

    Read from the table (:func:`claim`) or made from the values just
    inserted (:meth:`of`); frozen, so the thread that sends it and the
    transaction that wrote it share it safely. It becomes a staged message
    again in :func:`~._send.send_rows`.
    """

    id: int
    queue: str
    job_id: str
    job_type: str
    body: str
    message_attributes: dict[str, t.Any] | None
    message_group_id: str | None
    message_deduplication_id: str | None
    delay_seconds: int | None
    attempts: int

    @classmethod
    def of(cls, row_id: int, values: dict[str, t.Any]) -> OutboxRow:
        """The row just inserted with ``values`` (those of :func:`row_values`)."""
        attributes = values["message_attributes"]
        return cls(
            id=row_id,
            queue=values["queue"],
            job_id=values["job_id"],
            job_type=values["job_type"],
            body=values["body"],
            message_attributes=json.loads(attributes) if attributes else None,
            message_group_id=values["message_group_id"],
            message_deduplication_id=values["message_deduplication_id"],
            delay_seconds=values["delay_seconds"],
            attempts=0,
        )

    def send_params(self, fifo: bool) -> dict[str, t.Any]:
        """SendMessage arguments; on FIFO queues the job id deduplicates by default."""
        params: dict[str, t.Any] = {"MessageBody": self.body}
        if self.message_attributes:
            params["MessageAttributes"] = self.message_attributes
        if self.message_group_id is not None:
            params["MessageGroupId"] = self.message_group_id
        dedup = self.message_deduplication_id
        if dedup is None and fifo:
            dedup = self.job_id
        if dedup is not None:
            params["MessageDeduplicationId"] = dedup
        if self.delay_seconds is not None:
            params["DelaySeconds"] = self.delay_seconds
        return params


def row_values(
    queue: str, job_id: str, job_type: str, params: dict[str, t.Any], now: dt.datetime
) -> dict[str, t.Any]:
    """The columns of a new row for staged SendMessage ``params``."""
    attributes = params.get("MessageAttributes")
    return {
        "queue": queue,
        "job_id": job_id,
        "job_type": job_type,
        "body": params["MessageBody"],
        "message_attributes": json.dumps(attributes) if attributes else None,
        "message_group_id": params.get("MessageGroupId"),
        "message_deduplication_id": params.get("MessageDeduplicationId"),
        "delay_seconds": params.get("DelaySeconds"),
        "created_at": now,
        "available_at": now + dt.timedelta(seconds=GRACE_SECONDS),
        "attempts": 0,
    }


def begin_locked(connection: sa.Connection) -> None:
    """Start a transaction that may claim rows (SQLite: take the write lock now).

    The store's own SQLite engine begins with ``BEGIN IMMEDIATE`` already; an
    engine the app made begins lazily, so take the lock explicitly.
    """
    connection.begin()
    if connection.dialect.name != "sqlite":
        return
    dbapi = connection.connection.dbapi_connection
    if dbapi is not None and not getattr(dbapi, "in_transaction", True):
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def claim(
    connection: sa.Connection,
    *,
    limit: int,
    ids: t.Sequence[int] | None = None,
    include_fresh: bool = False,
) -> list[OutboxRow]:
    """Lock and return up to ``limit`` rows to send, oldest first.

    :param ids: only these rows (the immediate send after a commit); rows
        already sent (or rolled back) are simply not found.
    :param include_fresh: also rows still in their grace period (``outbox
        relay --once`` empties the outbox); a debounced row waits until due.
    """
    now = dt.datetime.now(dt.UTC)
    query = sa.select(outbox).order_by(outbox.c.id).limit(limit)
    if ids is not None:
        query = query.where(outbox.c.id.in_(list(ids)))
    elif include_fresh:
        fresh = sa.and_(outbox.c.attempts == 0, outbox.c.debounce_key.is_(None))
        query = query.where(sa.or_(outbox.c.available_at <= now, fresh))
    else:
        query = query.where(outbox.c.available_at <= now)
    rows = [
        _row(r) for r in connection.execute(query.with_for_update(skip_locked=True))
    ]
    return in_group_order(connection, rows)


def lease(connection: sa.Connection, rows: list[OutboxRow]) -> list[OutboxRow]:
    """Hold ``rows`` for a send made outside the write lock (SQLite); those still here.

    Run under SQLite's write lock: a relay's pass holds that lock from its claim
    to its write-back, so a row still in the table is not being sent by a relay,
    and a row a relay sent is gone. Moving ``available_at`` past the send keeps
    every relay off the rows however long the send takes; if this process dies
    first, the relay sends them once the lease ends.
    """
    if not rows:
        return rows
    ids = [row.id for row in rows]
    present = set(
        connection.execute(sa.select(outbox.c.id).where(outbox.c.id.in_(ids))).scalars()
    )
    if present:
        until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=SEND_LEASE_SECONDS)
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.id.in_(sorted(present)))
            .values(available_at=until)
        )
    return [row for row in rows if row.id in present]


def _row(record: sa.Row[t.Any]) -> OutboxRow:
    """A claimed row, its JSON attributes decoded."""
    attributes = record.message_attributes
    return OutboxRow(
        id=record.id,
        queue=record.queue,
        job_id=record.job_id,
        job_type=record.job_type,
        body=record.body,
        message_attributes=json.loads(attributes) if attributes else None,
        message_group_id=record.message_group_id,
        message_deduplication_id=record.message_deduplication_id,
        delay_seconds=record.delay_seconds,
        attempts=record.attempts,
    )


def in_group_order(connection: sa.Connection, rows: list[OutboxRow]) -> list[OutboxRow]:
    """Drop each grouped row that an earlier, unclaimed row of its group precedes.

    Such an earlier row is in another relay's hands, backing off, or not
    due yet: sending the later one first would break the group's order.
    """
    grouped = [r for r in rows if r.message_group_id is not None]
    if not grouped:
        return rows
    claimed = {r.id for r in rows}
    groups = {(r.queue, r.message_group_id) for r in grouped}
    highest = max(r.id for r in grouped)
    query = (
        sa.select(outbox.c.id, outbox.c.queue, outbox.c.message_group_id)
        .where(outbox.c.message_group_id.in_({g for _, g in groups}))
        .where(outbox.c.id <= highest)
        .order_by(outbox.c.id)
    )
    blocked: set[tuple[str, str | None]] = set()
    allowed: set[int] = set()
    for row_id, queue, group in connection.execute(query):
        key = (queue, group)
        if key not in groups or key in blocked:
            continue
        if row_id in claimed:
            allowed.add(row_id)
        else:
            blocked.add(key)
    return [r for r in rows if r.message_group_id is None or r.id in allowed]


def delete(connection: sa.Connection, ids: t.Collection[int]) -> None:
    """Delete the rows ``ids`` (sent), in the caller's transaction."""
    if ids:
        connection.execute(sa.delete(outbox).where(outbox.c.id.in_(list(ids))))


def mark_failed(
    connection: sa.Connection, failures: t.Mapping[int, tuple[int, str]]
) -> None:
    """Record ``row id -> (attempts so far, error)`` and back each row off."""
    now = dt.datetime.now(dt.UTC)
    for row_id, (attempts, error) in failures.items():
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.id == row_id)
            .values(
                attempts=attempts + 1,
                last_error=error[:MAX_ERROR_LENGTH],
                available_at=now + dt.timedelta(seconds=backoff_seconds(attempts + 1)),
            )
        )


def backoff_seconds(attempts: int) -> float:
    """1 s after the first failure, doubling up to a minute."""
    return float(min(MAX_BACKOFF_SECONDS, 2 ** min(attempts - 1, 16)))


@dataclasses.dataclass(frozen=True)
class QueueStatus:
    """One logical queue's rows in the outbox, for ``outbox status`` and metrics."""

    queue: str
    pending: int
    oldest_age_seconds: float
    failing: int


def status(connection: sa.Connection) -> list[QueueStatus]:
    """Pending rows per logical queue, with the oldest's age and those that failed."""
    now = dt.datetime.now(dt.UTC)
    query = (
        sa.select(
            outbox.c.queue,
            sa.func.count(),
            sa.func.min(outbox.c.created_at),
            sa.func.sum(sa.case((outbox.c.attempts > 0, 1), else_=0)),
        )
        .group_by(outbox.c.queue)
        .order_by(outbox.c.queue)
    )
    result: list[QueueStatus] = []
    for queue, count, oldest, failing in connection.execute(query):
        age = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        result.append(QueueStatus(queue, int(count), age, int(failing or 0)))
    return result
