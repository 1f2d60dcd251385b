"""The outbox table's rows: decoded, held, deleted once sent, backed off or parked.

The claim is in :mod:`._claim`, what operators do with rows in
:mod:`._parking`. Every function here runs in its caller's transaction (a
``Connection`` the caller began and commits): the claim, the send through the
pipeline and the write-back of one pass are one transaction, so what a crash
interrupts is rolled back and sent again by the next pass.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import typing as t
import weakref

import sqlalchemy as sa

from ...engine.sqs import check_message_attributes
from ..sql import outbox_table

if t.TYPE_CHECKING:
    from ...engine import QueueGroup

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
#: Failed sends after which a row is parked (``SQS_JOBS_OUTBOX_MAX_ATTEMPTS``):
#: with the back-off above, about 14 minutes of failing.
DEFAULT_MAX_ATTEMPTS = 20
#: A parked row's ``available_at``: never, as far as the claim's index knows.
PARKED_UNTIL = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)


#: SQS_JOBS_OUTBOX_MAX_ATTEMPTS per queue group (the app's), for the sends
#: after commit and the relays that are not told otherwise.
_max_attempts: weakref.WeakKeyDictionary[QueueGroup, int] = weakref.WeakKeyDictionary()


def set_max_attempts(group: QueueGroup, max_attempts: int) -> None:
    """Park ``group``'s rows after ``max_attempts`` failed sends."""
    _max_attempts[group] = max_attempts


def max_attempts_of(group: QueueGroup) -> int:
    """The failed sends after which ``group``'s rows are parked."""
    return _max_attempts.get(group, DEFAULT_MAX_ATTEMPTS)


class UnreadableRowError(ValueError):
    """A row's columns cannot be made into a message (its attributes are not JSON
    message attributes)."""


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
        return cls.read({**values, "id": row_id, "attempts": 0}, check=False)

    @classmethod
    def read(cls, record: t.Mapping[t.Any, t.Any], *, check: bool = True) -> OutboxRow:
        """The row of a table record (or of inserted values).

        :param check: check the attributes against SQS's rules (a row read
            back may hold anything; values the pipeline just made are checked).

        :raises UnreadableRowError: its attributes column is not JSON, or not
            message attributes SQS takes.
        """
        attributes = record["message_attributes"]
        decoded: dict[str, t.Any] | None = None
        if attributes:
            try:
                decoded = json.loads(attributes)
            except (ValueError, RecursionError) as exc:
                raise UnreadableRowError(
                    f"message_attributes is not JSON ({type(exc).__name__})"
                ) from None
            try:
                decoded = check_message_attributes(decoded) if check else decoded
            except (TypeError, ValueError) as exc:
                raise UnreadableRowError(str(exc)) from None
        return cls(
            id=record["id"],
            queue=record["queue"],
            job_id=record["job_id"],
            job_type=record["job_type"],
            body=record["body"],
            message_attributes=decoded,
            message_group_id=record["message_group_id"],
            message_deduplication_id=record["message_deduplication_id"],
            delay_seconds=record["delay_seconds"],
            attempts=record["attempts"],
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
    queue: str,
    job_id: str,
    job_type: str,
    params: dict[str, t.Any],
    now: dt.datetime,
    *,
    grace: bool = True,
) -> dict[str, t.Any]:
    """The columns of a new row for staged SendMessage ``params``.

    :param grace: the relays leave the row alone for :data:`GRACE_SECONDS`,
        the send after commit's; without, it is theirs at once.
    """
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
        "available_at": now + dt.timedelta(seconds=GRACE_SECONDS if grace else 0),
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


def lease(connection: sa.Connection, rows: list[OutboxRow]) -> list[OutboxRow]:
    """Hold ``rows`` for a send made outside the write lock (SQLite); those still here.

    Run under SQLite's write lock: a relay's pass holds that lock from its claim
    to its write-back, so a row still in the table is not being sent by a relay,
    and a row a relay sent is gone. Moving ``available_at`` past the send keeps
    every relay off the rows however long the send takes, and ``leased_until``
    keeps ``outbox relay --once`` (which takes fresh rows too) off them; if
    this process dies first, the relay sends them once the lease ends.

    Cost: one primary-key read and one update of ``rows`` (at most 100).
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
            .values(available_at=until, leased_until=until)
        )
    return [row for row in rows if row.id in present]


def delete(connection: sa.Connection, ids: t.Collection[int]) -> None:
    """Delete the rows ``ids`` (sent), in the caller's transaction."""
    if ids:
        connection.execute(sa.delete(outbox).where(outbox.c.id.in_(list(ids))))


def mark_failed(
    connection: sa.Connection,
    failures: t.Mapping[int, tuple[int, str]],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    poisoned: t.Collection[int] = (),
) -> list[int]:
    """Record ``row id -> (attempts so far, error)``; back each row off or park it.

    A row whose failures reach ``max_attempts``, or one of the ids
    ``poisoned`` (its failure can only repeat), is parked with its error; a row parked
    meanwhile (by an operator) stays parked. Returns the ids parked now.
    Cost: one primary-key update per distinct (attempts, error) pair, so a
    pass whose rows all failed alike writes once.
    """
    park_now = set(poisoned)
    at = dt.datetime.now(dt.UTC)
    alike: dict[tuple[int, str, bool], list[int]] = {}
    for row_id, (attempts, error) in failures.items():
        key = (attempts + 1, error[:MAX_ERROR_LENGTH], row_id in park_now)
        alike.setdefault(key, []).append(row_id)
    parked: list[int] = []
    for (attempts, error, at_once), ids in alike.items():
        if at_once or attempts >= max_attempts:
            park(connection, dict.fromkeys(ids, error), attempts=attempts, now=at)
            parked += ids
            continue
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.id.in_(ids), outbox.c.parked_at.is_(None))
            .values(
                attempts=attempts,
                last_error=error,
                leased_until=None,
                available_at=at + dt.timedelta(seconds=backoff_seconds(attempts)),
            )
        )
    return parked


def park(
    connection: sa.Connection,
    errors: t.Mapping[int, str | None],
    *,
    attempts: int | None = None,
    now: dt.datetime | None = None,
) -> list[int]:
    """Park the rows ``id -> error`` (None keeps the last error); return those found.

    A parked row is kept, with its error, and never sent until
    :func:`~._parking.retry` puts it back. Cost: one primary-key update per
    distinct error.
    """
    now = now or dt.datetime.now(dt.UTC)
    values: dict[str, t.Any] = {
        "parked_at": now,
        "available_at": PARKED_UNTIL,
        "leased_until": None,
    }
    if attempts is not None:
        values["attempts"] = attempts
    by_error: dict[str | None, list[int]] = {}
    for row_id, error in errors.items():
        by_error.setdefault(error, []).append(row_id)
    found: list[int] = []
    for error, ids in by_error.items():
        update = sa.update(outbox).where(outbox.c.id.in_(ids))
        if error is not None:
            update = update.values(last_error=error[:MAX_ERROR_LENGTH])
        result = connection.execute(update.values(**values).returning(outbox.c.id))
        found += result.scalars()
    return sorted(found)


def backoff_seconds(attempts: int) -> float:
    """1 s after the first failure, doubling up to a minute."""
    return float(min(MAX_BACKOFF_SECONDS, 2 ** min(attempts - 1, 16)))
