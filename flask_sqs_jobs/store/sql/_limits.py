"""Limits in ``sqs_jobs_limit_buckets`` and ``sqs_jobs_limit_permits`` (SQL).

A rate limit is one row per limit and key: its tokens and when they were
counted. A take reads the row under a row lock (``SELECT ... FOR UPDATE`` on
PostgreSQL, ``BEGIN IMMEDIATE``'s write lock on SQLite), applies the token
bucket's arithmetic and writes the row back in the same transaction. A
concurrency limit is up to ``limit`` rows per limit and key, one per slot,
each held by one job until its ``expires_at``; a taker locks the key's rows
(in slot order) and takes the first free one: a slot whose lease ended is
free again, so a dead worker's permits come back on their own. Times are
this process's clock (seconds since the epoch): keep the workers' clocks in
sync (NTP).
"""

from __future__ import annotations

import time
import typing as t

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite

from ...engine.flow import BucketState
from ...engine.flow import MAX_LIMIT_KEY_LENGTH
from ...engine.flow import RateLimit
from ...engine.flow import take_token
from ._tables import metadata

#: A write that loses a race (a row inserted in between) tries again, at most
#: this many times.
_ATTEMPTS = 5

#: One token bucket per (limit, key).
buckets = sa.Table(
    "sqs_jobs_limit_buckets",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("key", sa.String(MAX_LIMIT_KEY_LENGTH), primary_key=True),
    sa.Column("tokens", sa.Float(), nullable=False),
    #: When ``tokens`` was counted (seconds since the epoch).
    sa.Column("updated_at", sa.Float(), nullable=False),
)

#: The concurrency slots of each (limit, key): a holder and its lease's end.
permits = sa.Table(
    "sqs_jobs_limit_permits",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("key", sa.String(MAX_LIMIT_KEY_LENGTH), primary_key=True),
    sa.Column("slot", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("holder", sa.String(160), nullable=True),
    #: When the holder's lease ends (seconds since the epoch).
    sa.Column("expires_at", sa.Float(), nullable=False),
)


def _insert(dialect: str, table: sa.Table) -> t.Any:
    """An ``INSERT ... ON CONFLICT DO NOTHING RETURNING name`` for ``dialect``:
    a row back when it inserted one."""
    insert: t.Any
    if dialect == "postgresql":
        insert = sa.dialects.postgresql.insert(table).on_conflict_do_nothing()
    elif dialect == "sqlite":
        insert = sa.dialects.sqlite.insert(table).on_conflict_do_nothing()
    else:
        raise RuntimeError(f"limits need SQLite or PostgreSQL, not {dialect!r}")
    return insert.returning(table.c.name)


class SQLLimits:
    """The engine's ``LimitStore`` in SQL.

    Made by :meth:`SQLAlchemyStore.limits`; called by the worker's limit gate
    on slot threads (:meth:`renew_permit` on the heartbeat's pool), with no
    lock held. Each call is one short transaction of its own.
    """

    def __init__(self, engine: t.Callable[[], sa.Engine]) -> None:
        self._engine = engine

    def take_token(self, name: str, key: str, limit: int, per: float) -> float:
        """Take one token of ``(name, key)``: 0, or the seconds until one."""
        rate = RateLimit(name, limit, per)
        engine = self._engine()
        where = (buckets.c.name == name) & (buckets.c.key == key)
        for _ in range(_ATTEMPTS):
            with engine.begin() as connection:
                row = connection.execute(
                    sa.select(buckets.c.tokens, buckets.c.updated_at)
                    .where(where)
                    .with_for_update()
                ).first()
                state = None if row is None else BucketState(row[0], row[1])
                taken = take_token(rate, state, time.time())
                if not taken.taken:
                    return max(taken.retry_after, 1e-6)
                values = {
                    "tokens": taken.state.tokens,
                    "updated_at": taken.state.updated_at,
                }
                if row is not None:
                    connection.execute(buckets.update().where(where).values(values))
                    return 0.0
                inserted = connection.execute(
                    _insert(engine.dialect.name, buckets),
                    {"name": name, "key": key, **values},
                ).first()
                if inserted is not None:
                    return 0.0
        raise RuntimeError(f"the bucket of limit {name!r} kept changing; gave up")

    def acquire_permit(
        self, name: str, key: str, limit: int, holder: str, lease_seconds: float
    ) -> int | None:
        """Take a free slot of ``(name, key)`` for ``holder``; None: all held."""
        engine = self._engine()
        where = (permits.c.name == name) & (permits.c.key == key)
        for _ in range(_ATTEMPTS):
            now = time.time()
            with engine.begin() as connection:
                rows = connection.execute(
                    sa.select(permits.c.slot, permits.c.holder, permits.c.expires_at)
                    .where(where & (permits.c.slot < limit))
                    # One order for every taker: row locks taken out of order
                    # would deadlock on PostgreSQL.
                    .order_by(permits.c.slot)
                    .with_for_update()
                ).all()
                held = {s for s, h, e in rows if h is not None and e > now}
                free = [slot for slot in range(limit) if slot not in held]
                if not free:
                    return None
                slot = free[0]
                values = {"holder": holder, "expires_at": now + lease_seconds}
                if any(s == slot for s, _, _ in rows):
                    changed = connection.execute(
                        permits.update()
                        .where(where & (permits.c.slot == slot))
                        .where(
                            permits.c.holder.is_(None) | (permits.c.expires_at <= now)
                        )
                        .values(values)
                    ).rowcount
                else:
                    inserted = connection.execute(
                        _insert(engine.dialect.name, permits),
                        {"name": name, "key": key, "slot": slot, **values},
                    ).first()
                    changed = 0 if inserted is None else 1
                if changed == 1:
                    return slot
        raise RuntimeError(f"the permits of limit {name!r} kept changing; gave up")

    def renew_permit(
        self, name: str, key: str, slot: int, holder: str, lease_seconds: float
    ) -> bool:
        """Push the slot's lease on; False when ``holder`` lost it."""
        with self._engine().begin() as connection:
            changed = connection.execute(
                self._held(name, key, slot, holder).values(
                    expires_at=time.time() + lease_seconds
                )
            ).rowcount
        return changed == 1

    def release_permit(self, name: str, key: str, slot: int, holder: str) -> None:
        """Free the slot if ``holder`` still holds it."""
        with self._engine().begin() as connection:
            connection.execute(
                self._held(name, key, slot, holder).values(holder=None, expires_at=0.0)
            )

    @staticmethod
    def _held(name: str, key: str, slot: int, holder: str) -> sa.Update:
        return permits.update().where(
            (permits.c.name == name)
            & (permits.c.key == key)
            & (permits.c.slot == slot)
            & (permits.c.holder == holder)
        )
