"""Debounce: one outbox row per key, whose send time each enqueue moves.

The first enqueue with a key writes its row with ``available_at = now +
debounce``; each later one, in its own transaction, replaces the row's
message (payload, job id, attributes) and moves ``available_at`` again, in
one upsert on the ``debounce_key`` unique index. The relay sends the row
once it is due; the send after commit never takes it.

Against the relay: the relay claims a due row under a row lock (PostgreSQL
``FOR UPDATE SKIP LOCKED``; SQLite's write lock) and sends and deletes it in
the same transaction. An enqueue that comes while it does waits for that
transaction: if the row was sent, the enqueue writes a new row (a new
window, so the job runs once more, with the newer payload); if the send
failed, it updates the row that is still there. A relay never skips an
update: a row being updated is locked, and the relay takes it on a later
pass. So the last payload is always sent, at least ``debounce`` seconds
after the last enqueue; an earlier one only when it was due before that
enqueue came.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite
import sqlalchemy.orm

from ..sql import outbox_table

#: The columns a later enqueue replaces (``created_at`` stays the first's).
_REPLACED = (
    "queue",
    "job_id",
    "job_type",
    "body",
    "message_attributes",
    "message_group_id",
    "message_deduplication_id",
    "delay_seconds",
    "available_at",
)


def write_debounced(
    session: sa.orm.Session,
    values: dict[str, t.Any],
    key: str,
    seconds: float,
    now: dt.datetime,
) -> None:
    """Insert the debounced row for ``key``, or replace its message and send time.

    Runs in the caller's transaction; the row becomes due ``seconds`` after
    ``now``.
    """
    dialect = session.get_bind().dialect.name
    if dialect not in ("postgresql", "sqlite"):
        raise RuntimeError(
            f"debounce needs SQLite or PostgreSQL; the store is on {dialect}"
        )
    insert: t.Any = (
        sa.dialects.postgresql.insert(outbox_table)
        if dialect == "postgresql"
        else sa.dialects.sqlite.insert(outbox_table)
    )
    row = {
        **values,
        "available_at": now + dt.timedelta(seconds=seconds),
        "debounce_key": key,
    }
    statement = insert.values(row)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[outbox_table.c.debounce_key],
            set_={name: statement.excluded[name] for name in _REPLACED},
        )
    )
