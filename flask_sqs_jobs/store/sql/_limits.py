"""Limits in ``sqs_jobs_limit_buckets`` and ``sqs_jobs_limit_permits`` (SQL).

A rate limit is one row per limit and key: its tokens and when they were
counted. A take is one conditional ``UPDATE``: refill the row up to now and
take a token, where the refilled row holds one (the token bucket's
arithmetic, in SQL); the row lock (PostgreSQL) or ``BEGIN IMMEDIATE``'s write
lock (SQLite) orders racing takes. A concurrency limit is ``limit`` rows per
limit and key, one per slot, each held by one job until its ``expires_at``;
a take is one ``UPDATE`` of the first free slot (``FOR UPDATE SKIP LOCKED``
on PostgreSQL, so racing takers pass each other), and a slot whose lease
ended is free again, so a dead worker's permits come back on their own.

A take asks for up to ``most`` tokens at once (a worker keeps the extra
ones a moment for its next jobs, see ``engine/flow/_token_cache.py``). On
PostgreSQL each call is one statement in autocommit mode: one round trip.
Times are this process's clock
(seconds since the epoch): keep the workers' clocks in sync (NTP).
"""

from __future__ import annotations

import math
import random
import time
import typing as t

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite

from ...engine.flow import BucketState
from ...engine.flow import capacity
from ...engine.flow import MAX_LIMIT_KEY_LENGTH
from ...engine.flow import RateLimit
from ...engine.flow import take_token
from ._tables import metadata
from ._tables import one_statement

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


#: A take that finds free slots all locked by racing calls looks again, at
#: most this many times.
_ATTEMPTS = 20


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


def _pair(dialect: str) -> tuple[t.Any, t.Any]:
    """SQL's two-argument min and max for ``dialect``."""
    if dialect == "postgresql":
        return sa.func.least, sa.func.greatest
    return sa.func.min, sa.func.max


def _take_statement(dialect: str) -> sa.Update:
    """The take: refill the bucket up to ``p_now`` (at most ``p_limit``, its
    capacity) and take ``p_most`` tokens where the refilled bucket holds them;
    a row back when it took them."""
    least, greatest = _pair(dialect)
    now = sa.bindparam("p_now", type_=sa.Float())
    most = sa.bindparam("p_most", type_=sa.Float())
    elapsed = greatest(sa.literal(0.0), now - buckets.c.updated_at)
    refilled = least(
        sa.bindparam("p_limit", type_=sa.Float()),
        buckets.c.tokens + elapsed * sa.bindparam("p_rate", type_=sa.Float()),
    )
    return (
        buckets.update()
        .where(buckets.c.name == sa.bindparam("p_name"))
        .where(buckets.c.key == sa.bindparam("p_key"))
        .where(refilled >= most)
        .values(tokens=refilled - most, updated_at=greatest(buckets.c.updated_at, now))
        .returning(buckets.c.tokens)
    )


def _key_is(table: sa.Table) -> sa.ColumnElement[bool]:
    return (table.c.name == sa.bindparam("p_name")) & (
        table.c.key == sa.bindparam("p_key")
    )


#: A slot nobody holds now (``p_now``).
_FREE = permits.c.holder.is_(None) | (
    permits.c.expires_at <= sa.bindparam("p_now", type_=sa.Float())
)
_SLOTS = _key_is(permits) & (permits.c.slot < sa.bindparam("p_limit"))
#: How many of the ``p_limit`` slots exist, and how many are held.
_COUNT = sa.select(sa.func.count(), sa.func.count().filter(sa.not_(_FREE))).where(
    _SLOTS
)
_HELD = (
    _key_is(permits)
    & (permits.c.slot == sa.bindparam("p_slot"))
    & (permits.c.holder == sa.bindparam("p_holder"))
)
_RENEW = (
    permits.update()
    .where(_HELD)
    .values(expires_at=sa.bindparam("p_expires", type_=sa.Float()))
    .returning(permits.c.slot)
)
_RELEASE = permits.update().where(_HELD).values(holder=None, expires_at=0.0)


def _acquire_statement(dialect: str) -> sa.Update:
    """The first free slot of ``p_name``, ``p_key`` taken for ``p_holder``."""
    pick = sa.select(permits.c.slot).where(_SLOTS & _FREE).order_by(permits.c.slot)
    pick = pick.limit(1)
    if dialect == "postgresql":
        pick = pick.with_for_update(skip_locked=True)
    return (
        permits.update()
        .where(_key_is(permits) & (permits.c.slot == pick.scalar_subquery()))
        .values(
            holder=sa.bindparam("p_holder"),
            expires_at=sa.bindparam("p_expires", type_=sa.Float()),
        )
        .returning(permits.c.slot)
    )


class SQLLimits:
    """The engine's ``LimitStore`` in SQL.

    Made by :meth:`SQLAlchemyStore.limits`; called by the worker's limit gate
    on slot threads (:meth:`renew_permit` on the heartbeat's pool), with no
    lock held. Each call is one short transaction of its own.
    """

    def __init__(self, engine: t.Callable[[], sa.Engine]) -> None:
        self._engine = engine
        #: The takes' statements, built on first use for the engine's dialect.
        self._take: sa.Update | None = None
        self._acquire: sa.Update | None = None

    def take_token(self, name: str, key: str, limit: int, per: float) -> float:
        """Take one token of ``(name, key)``: 0, or the seconds until one."""
        taken, wait = self.take_tokens(name, key, limit, per, 1)
        return 0.0 if taken else wait

    def take_tokens(
        self, name: str, key: str, limit: int, per: float, most: int
    ) -> tuple[int, float]:
        """Take up to ``most`` tokens of ``(name, key)``: how many, and the wait.

        One ``UPDATE`` when the bucket holds ``most``; when it holds fewer,
        a second one takes a single token; a bucket never used is inserted.
        """
        engine = self._engine()
        if self._take is None:
            self._take = _take_statement(engine.dialect.name)
        rate = RateLimit(name, limit, per)
        full = capacity(rate)
        now = time.time()
        values = {
            "p_name": name,
            "p_key": key,
            "p_now": now,
            "p_limit": full,
            "p_rate": limit / per,
        }
        with one_statement(engine) as connection:
            for count in dict.fromkeys((max(1, most), 1)):
                taken = connection.execute(
                    self._take, {**values, "p_most": float(count)}
                ).first()
                if taken is not None:
                    return count, 0.0
            count = min(max(1, most), math.floor(full))
            inserted = connection.execute(
                _insert(engine.dialect.name, buckets),
                {"name": name, "key": key, "tokens": full - count, "updated_at": now},
            ).first()
            if inserted is not None:
                return count, 0.0
            row = connection.execute(
                sa.select(buckets.c.tokens, buckets.c.updated_at).where(
                    (buckets.c.name == name) & (buckets.c.key == key)
                )
            ).first()
        if row is None:  # pragma: no cover - a row is never deleted
            return 0, 1e-6
        wait = take_token(rate, BucketState(row[0], row[1]), now).retry_after
        return 0, max(wait, 1e-6)

    def acquire_permit(
        self, name: str, key: str, limit: int, holder: str, lease_seconds: float
    ) -> int | None:
        """Take a free slot of ``(name, key)`` for ``holder``; None: all held."""
        engine = self._engine()
        if self._acquire is None:
            self._acquire = _acquire_statement(engine.dialect.name)
        for _ in range(_ATTEMPTS):
            now = time.time()
            values = {"p_name": name, "p_key": key, "p_limit": limit, "p_now": now}
            with one_statement(engine) as connection:
                slot = connection.execute(
                    self._acquire,
                    {**values, "p_holder": holder, "p_expires": now + lease_seconds},
                ).scalar()
                if slot is not None:
                    return int(slot)
                rows, held = connection.execute(_COUNT, values).one()
                if rows < limit:
                    self._seed(connection, engine.dialect.name, name, key, limit)
                elif held >= limit:
                    return None
            # Free slots locked by racing takers or returners: look again.
            time.sleep(random.uniform(0.001, 0.01))
        raise RuntimeError(f"the permits of limit {name!r} kept changing; gave up")

    @staticmethod
    def _seed(
        connection: sa.Connection, dialect: str, name: str, key: str, limit: int
    ) -> None:
        """Add the slots ``(name, key)`` lacks, free."""
        rows = [
            {"name": name, "key": key, "slot": n, "holder": None, "expires_at": 0.0}
            for n in range(limit)
        ]
        connection.execute(_insert(dialect, permits), rows)

    def renew_permit(
        self, name: str, key: str, slot: int, holder: str, lease_seconds: float
    ) -> bool:
        """Push the slot's lease on; False when ``holder`` lost it."""
        with one_statement(self._engine()) as connection:
            renewed = connection.execute(
                _RENEW,
                {
                    "p_name": name,
                    "p_key": key,
                    "p_slot": slot,
                    "p_holder": holder,
                    "p_expires": time.time() + lease_seconds,
                },
            ).first()
        return renewed is not None

    def release_permit(self, name: str, key: str, slot: int, holder: str) -> None:
        """Free the slot if ``holder`` still holds it."""
        with one_statement(self._engine()) as connection:
            connection.execute(
                _RELEASE,
                {"p_name": name, "p_key": key, "p_slot": slot, "p_holder": holder},
            )
