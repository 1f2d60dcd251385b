"""Idempotency keys in the ``sqs_jobs_idempotency`` table (SQLite, PostgreSQL).

A claim is one atomic upsert: ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``
the existing row's lease has ended or its completion has expired, so two
workers racing for a key never both get it (the row lock decides on
PostgreSQL, ``BEGIN IMMEDIATE``'s write lock on SQLite). Every other write is
conditional on the holder's token. Times come from this process's UTC clock,
passed to each statement, so keep the workers' clocks in sync (NTP).
"""

from __future__ import annotations

import datetime as dt
import typing as t
import uuid

import sqlalchemy as sa
import sqlalchemy.dialects.postgresql
import sqlalchemy.dialects.sqlite
import sqlalchemy.orm

from ...engine.model import Claim
from ...engine.model import ClaimState
from ...engine.sqs import read_result
from ...engine.sqs import result_json
from ...engine.sqs import ResultNotKept
from ._tables import idempotency

_IN_PROGRESS = "in_progress"
_COMPLETED = "completed"
#: A claim that finds the row gone or free again (relinquished or expired in
#: between) tries again, at most this many times.
_CLAIM_ATTEMPTS = 5


class IdempotencyKeyLost(RuntimeError):
    """The token no longer holds the key (its lease ended and another took it).

    Raised by :meth:`SQLIdempotencyKeys.complete`; the job guard reports it,
    retries the job and rolls the job's session back, so nothing the handler
    wrote in it commits. The key stays with its new holder.
    """


class SQLIdempotencyKeys:
    """The engine's ``IdempotencyKeys`` in SQL.

    Made by :meth:`SQLAlchemyStore.idempotency_keys` and called by the
    worker's job guard on the slot thread running an idempotent handler
    (:meth:`renew` from the heartbeat's pool), with no lock held: every
    statement is atomic on its own, so any number of workers may race for the
    same key. The claim statement is built on first use, for the engine's
    dialect; the others are built once, at import.

    Each call is one short transaction of its own, except :meth:`complete`
    with a ``session``, which writes in the job's transaction.
    """

    def __init__(self, engine: t.Callable[[], sa.Engine]) -> None:
        self._engine = engine
        self._claim: sa.Executable | None = None

    def claim(
        self, key: str, *, payload_hash: str, job_id: str, lease_seconds: float
    ) -> Claim:
        """Take ``key`` for ``lease_seconds``, or say who has it.

        One upsert ``RETURNING`` the token; when it is not ours, one
        ``SELECT`` of the row that refused it, which gives ``COMPLETED`` (with
        the kept result), ``IN_PROGRESS`` (with the time left on its lease) or
        ``CONFLICT`` (another payload hash). A row freed in between is tried
        again with a new token.

        :raises RuntimeError: the row changed under all 5 attempts, or the
            database is neither SQLite nor PostgreSQL. The guard retries the job.
        """
        engine = self._engine()
        if self._claim is None:
            self._claim = _claim_statement(engine.dialect.name)
        for _ in range(_CLAIM_ATTEMPTS):
            token, now = uuid.uuid4().hex, _now()
            with engine.begin() as connection:
                claimed = connection.execute(
                    self._claim,
                    {
                        "p_key": key,
                        "p_payload_hash": payload_hash,
                        "p_job_id": job_id,
                        "p_token": token,
                        "p_now": now,
                        "p_lease_expires_at": now + dt.timedelta(seconds=lease_seconds),
                    },
                ).scalar()
                if claimed == token:
                    return Claim(ClaimState.CLAIMED, token=token)
                row = connection.execute(_FIND, {"p_key": key}).first()
            found = _what_was_found(row, payload_hash, now)
            if found is not None:
                return found
        raise RuntimeError(
            f"idempotency key {key!r} kept changing while being claimed;"
            f" gave up after {_CLAIM_ATTEMPTS} attempts"
        )

    def renew(self, key: str, token: str, lease_seconds: float) -> bool:
        """Push the lease to ``lease_seconds`` from now: one ``UPDATE``.

        False when ``token`` no longer holds the key in progress (its lease
        ended and another claimed it, or it was completed); the guard logs it.
        """
        with self._engine().begin() as connection:
            renewed = connection.execute(
                _RENEW,
                {
                    "p_key": key,
                    "p_token": token,
                    "p_lease_expires_at": _now() + dt.timedelta(seconds=lease_seconds),
                },
            ).rowcount
        return renewed == 1

    def complete(
        self,
        key: str,
        token: str,
        *,
        result: t.Any,
        ttl_seconds: float,
        session: t.Any = None,
    ) -> None:
        """Mark the key completed, keeping ``result``.

        One ``UPDATE`` conditional on ``token`` holding the key in progress.
        With ``session`` (the job's own, from the guard) it runs in that
        transaction, so the key completes exactly when the handler's writes
        commit; without, in a transaction of its own.

        :raises ValueError: ``result`` cannot be kept (:func:`result_json`).
        :raises IdempotencyKeyLost: ``token`` no longer holds the key.
        """
        try:
            encoded = None if result is None else result_json(result)
        except ResultNotKept as exc:
            raise ValueError(
                f"an idempotent handler's result is not kept: {exc}"
            ) from None
        now = _now()
        params = {
            "p_key": key,
            "p_token": token,
            "p_expires_at": now + dt.timedelta(seconds=ttl_seconds),
            "p_result": encoded,
            "p_now": now,
        }
        if session is not None:
            done = t.cast(sa.orm.Session, session).execute(_COMPLETE, params)
            updated = t.cast(sa.CursorResult[t.Any], done).rowcount
        else:
            with self._engine().begin() as connection:
                updated = connection.execute(_COMPLETE, params).rowcount
        if updated != 1:
            raise IdempotencyKeyLost(
                f"idempotency key {key!r} is no longer held by this job (its lease"
                " ended and another job claimed it); not marked completed"
            )

    def relinquish(self, key: str, token: str) -> None:
        """Delete the key if ``token`` holds it in progress (one ``DELETE``).

        Called by the guard when the handler failed, so the job's retry can
        claim the key at once; another holder's row is left alone.
        """
        with self._engine().begin() as connection:
            connection.execute(_RELINQUISH, {"p_key": key, "p_token": token})

    def forget_expired(self, limit: int = 1000) -> int:
        """Delete up to ``limit`` completed keys whose time is up; return how many.

        One ``DELETE ... WHERE key IN (SELECT ... LIMIT)`` on the
        ``expires_at`` index; run by each worker's presence service at most
        once an hour. Several workers doing it at once delete disjoint or
        already-deleted rows, which is harmless.
        """
        now = _now()
        expired = (
            sa.select(idempotency.c.key)
            .where(idempotency.c.expires_at <= now)
            .limit(limit)
            .scalar_subquery()
        )
        with self._engine().begin() as connection:
            return int(
                connection.execute(
                    sa.delete(idempotency).where(
                        idempotency.c.key.in_(expired),
                        idempotency.c.expires_at <= now,
                    )
                ).rowcount
            )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# Built once, with named parameters: building a statement per call costs more
# CPU than the database's round trip.
def _param(name: str, column: sa.Column[t.Any]) -> sa.BindParameter[t.Any]:
    return sa.bindparam(f"p_{name}", type_=column.type)


c = idempotency.c
_NOW = _param("now", c.created_at)
_HELD = (
    c.key == _param("key", c.key),
    c.token == _param("token", c.token),
    c.status == _IN_PROGRESS,
)
_FIND = sa.select(idempotency).where(c.key == _param("key", c.key))
_RENEW = (
    sa.update(idempotency)
    .where(*_HELD)
    .values(lease_expires_at=_param("lease_expires_at", c.lease_expires_at))
)
_COMPLETE = (
    sa.update(idempotency)
    .where(*_HELD)
    .values(
        status=_COMPLETED,
        lease_expires_at=None,
        expires_at=_param("expires_at", c.expires_at),
        result=_param("result", c.result),
        completed_at=_NOW,
    )
)
_RELINQUISH = sa.delete(idempotency).where(*_HELD)
del c


def _claim_statement(dialect: str) -> sa.Executable:
    """Insert the key, or take over its row when the row's time is up."""
    if dialect not in ("postgresql", "sqlite"):
        raise RuntimeError(
            f"idempotency keys need SQLite or PostgreSQL; this store is on {dialect}"
        )
    c = idempotency.c
    insert: t.Any = (
        sa.dialects.postgresql.insert(idempotency)
        if dialect == "postgresql"
        else sa.dialects.sqlite.insert(idempotency)
    )
    statement = insert.values(
        key=_param("key", c.key),
        status=_IN_PROGRESS,
        payload_hash=_param("payload_hash", c.payload_hash),
        job_id=_param("job_id", c.job_id),
        token=_param("token", c.token),
        lease_expires_at=_param("lease_expires_at", c.lease_expires_at),
        expires_at=None,
        result=None,
        created_at=_NOW,
        completed_at=None,
    )
    free = sa.or_(
        sa.and_(c.status == _IN_PROGRESS, c.lease_expires_at <= _NOW),
        sa.and_(c.status == _COMPLETED, c.expires_at <= _NOW),
    )
    taken_over = [col.name for col in idempotency.columns if col.name != "key"]
    return t.cast(
        sa.Executable,
        statement.on_conflict_do_update(
            index_elements=[c.key],
            set_={name: statement.excluded[name] for name in taken_over},
            where=free,
        ).returning(c.token),
    )


def _what_was_found(row: t.Any, payload_hash: str, now: dt.datetime) -> Claim | None:
    """The claim's answer from the row that refused it; None: try again."""
    if row is None:
        return None
    if row.payload_hash != payload_hash:
        return Claim(ClaimState.CONFLICT, holder_job_id=row.job_id)
    if row.status == _COMPLETED:
        if row.expires_at is not None and row.expires_at <= now:
            return None
        return Claim(
            ClaimState.COMPLETED,
            holder_job_id=row.job_id,
            result=read_result(row.result),
        )
    lease_ends = row.lease_expires_at
    if lease_ends is None or lease_ends <= now:
        return None
    return Claim(
        ClaimState.IN_PROGRESS,
        holder_job_id=row.job_id,
        retry_after_seconds=(lease_ends - now).total_seconds(),
    )
