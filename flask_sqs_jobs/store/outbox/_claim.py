"""The relay's claim: the oldest rows it may send now, FIFO groups kept in order.

A row of a message group may go only after every earlier row of its group.
The claim leaves out, in the query itself, each grouped row that an earlier
row of its group holds back (backing off, parked, held by the send after
commit, still in its grace period), so a group blocked by any number of rows
never fills a claim: the rows of every other queue and group behind it are
claimed on the first pass.

PostgreSQL locks the claimed rows with ``FOR UPDATE SKIP LOCKED``, so
several relays share a backlog without sending a row twice; SQLite runs each
claim under the database's write lock (``BEGIN IMMEDIATE``), so relays take
turns.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa
import structlog

from ...engine.model import loggable_text
from ._rows import outbox
from ._rows import OutboxRow
from ._rows import park
from ._rows import UnreadableRowError

log = structlog.get_logger(__name__)

#: Held-back rows moved out of the claim's way per pass, at most.
PUSH_LIMIT = 1000


@dataclasses.dataclass(frozen=True)
class Claimed:
    """What one claim took: the rows to send, how many it parked unread, and
    how many held-back rows it moved out of the way (both to commit)."""

    rows: list[OutboxRow]
    parked: int = 0
    pushed: int = 0


def claim(
    connection: sa.Connection,
    *,
    limit: int,
    ids: t.Sequence[int] | None = None,
    include_fresh: bool = False,
) -> Claimed:
    """Lock and return up to ``limit`` rows to send, oldest first.

    A row whose columns cannot be read is parked here, with the reason, and
    not returned. Without ``ids``, the due rows that an earlier row of their
    group holds back are first moved out of the way (:func:`push_back`).

    :param ids: only these rows (the immediate send after a commit); rows
        already sent (or rolled back) are simply not found.
    :param include_fresh: also rows still in their grace period (``outbox
        relay --once`` empties the outbox), never those the send after commit
        holds.

    Cost: one range scan of the index ``(available_at, id)`` over the due
    rows (parked and held-back rows sit later in it, out of the range),
    stopping after ``limit`` sendable ones; each grouped row adds a probe of
    the index ``(message_group_id, id)`` that stops at its group's first
    earlier row (a held-back row not moved yet costs that probe on every
    pass, hence :func:`push_back` first). Then :func:`in_group_order` reads
    the claimed groups' earlier rows.
    """
    now = dt.datetime.now(dt.UTC)
    query = sa.select(outbox).order_by(outbox.c.id).limit(limit)
    pushed = 0
    if ids is not None:
        query = query.where(outbox.c.id.in_(list(ids)), outbox.c.parked_at.is_(None))
    else:
        pushed = push_back(connection, now, include_fresh)
        query = query.where(sendable(outbox, now, include_fresh)).where(
            sa.or_(
                outbox.c.message_group_id.is_(None),
                sa.not_(_held_back(outbox, now, include_fresh)),
            )
        )
    rows: list[OutboxRow] = []
    unreadable: dict[int, str] = {}
    locked = query.with_for_update(skip_locked=True, of=outbox)
    for record in connection.execute(locked).mappings():
        try:
            rows.append(OutboxRow.read(record))
        except UnreadableRowError as exc:
            unreadable[record["id"]] = f"{type(exc).__name__}: {exc}"
    if unreadable:
        park(connection, unreadable)
        log.warning(
            "outbox_row_parked",
            count=len(unreadable),
            row_ids=sorted(unreadable),
            error=loggable_text("; ".join(sorted(set(unreadable.values())))),
            next="flask sqs-jobs outbox list --parked",
        )
    return Claimed(in_group_order(connection, rows), len(unreadable), pushed)


def push_back(connection: sa.Connection, now: dt.datetime, include_fresh: bool) -> int:
    """Move due rows held back by an earlier row of their group to when the
    group's first such row is due (parked: ``PARKED_UNTIL``); return how many.

    So a blocked group costs later passes nothing: its rows leave the range
    the claim scans, and come back with the row that held them (retrying or
    dropping a parked row brings back every row it held:
    :func:`~._parking.retry_rows`). At most :data:`PUSH_LIMIT` rows a pass,
    the oldest, leaving those another relay has locked (``SKIP LOCKED``).
    Cost: the claim's scan up to that many held-back rows, then per group one
    probe of ``(message_group_id, id)`` and one update by primary key.
    """
    candidate = outbox.alias("candidate")
    blocked = (
        sa.select(candidate.c.id, candidate.c.queue, candidate.c.message_group_id)
        .where(sendable(candidate, now, include_fresh))
        .where(candidate.c.message_group_id.is_not(None))
        .where(_held_back(candidate, now, include_fresh))
        .order_by(candidate.c.id)
        .limit(PUSH_LIMIT)
        .with_for_update(skip_locked=True, of=candidate)
    )
    groups: dict[tuple[str, str], list[int]] = {}
    for row_id, queue, group in connection.execute(blocked):
        groups.setdefault((queue, group), []).append(row_id)
    pushed = 0
    for (queue, group), ids in groups.items():
        # The group's first row that holds it back: at the start of the
        # group's index range.
        until = connection.execute(
            sa.select(outbox.c.available_at)
            .where(outbox.c.message_group_id == group, outbox.c.queue == queue)
            .where(outbox.c.id < max(ids))
            .where(sa.not_(sendable(outbox, now, include_fresh)))
            .order_by(outbox.c.id)
            .limit(1)
        ).scalar()
        if until is None:
            continue  # sent meanwhile: the rows are free to go
        connection.execute(
            sa.update(outbox).where(outbox.c.id.in_(ids)).values(available_at=until)
        )
        pushed += len(ids)
    return pushed


def _held_back(
    table: sa.FromClause, now: dt.datetime, include_fresh: bool
) -> sa.ColumnElement[bool]:
    """An earlier row of the group of ``table``'s row cannot be sent now."""
    earlier = outbox.alias("earlier")
    return (
        sa.exists()
        .where(earlier.c.message_group_id == table.c.message_group_id)
        .where(earlier.c.queue == table.c.queue)
        .where(earlier.c.id < table.c.id)
        .where(sa.not_(sendable(earlier, now, include_fresh)))
    )


def sendable(
    table: sa.FromClause, now: dt.datetime, include_fresh: bool
) -> sa.ColumnElement[bool]:
    """The rows a claim may take: due, or (``include_fresh``) never tried nor
    held (a debounced row waits until due all the same)."""
    due = table.c.available_at <= now
    if not include_fresh:
        return due
    fresh = sa.and_(
        table.c.attempts == 0,
        table.c.leased_until.is_(None),
        table.c.parked_at.is_(None),
        table.c.debounce_key.is_(None),
    )
    return sa.or_(due, fresh)


def in_group_order(connection: sa.Connection, rows: list[OutboxRow]) -> list[OutboxRow]:
    """Drop each grouped row that an earlier, unclaimed row of its group precedes.

    Such an earlier row is in another relay's hands, backing off, parked or
    not due yet: sending the later one first would break the group's order.
    Cost: one scan of the index ``(message_group_id, id)`` over the claimed
    groups' rows up to the highest claimed id.
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
