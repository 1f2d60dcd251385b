"""Waking the relays at a commit: ``NOTIFY`` and ``LISTEN`` on PostgreSQL.

Rows left to the relays (``SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT = False``, or
``send_after_commit=False`` per call) would wait for a relay's next look, up
to a second. On PostgreSQL the writing transaction also sends a ``NOTIFY``,
which the server delivers at its commit (and drops at a rollback), and an
idle relay ``LISTEN``s for it on a connection of its own, so it claims the
rows within milliseconds. Elsewhere (SQLite, another driver) the relay looks
every second as before. A notification carries nothing: it only ends a
wait, and the claim decides what is sent, so a lost or extra one is harmless.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time
import typing as t

import sqlalchemy as sa
import sqlalchemy.orm
import structlog

log = structlog.get_logger(__name__)

#: The channel the writers notify and the relays listen on.
CHANNEL = "sqs_jobs_outbox"
#: How often a listening relay also checks whether it was asked to wake or stop.
_SLICE_SECONDS = 0.2
#: How long a relay whose listening failed looks every second before it
#: tries to listen again.
_RETRY_SECONDS = 5.0
_NOTIFY = sa.text("SELECT pg_notify(:channel, '')")


def notify_relays(session: sa.orm.Session) -> None:
    """Wake the listening relays when ``session``'s transaction commits.

    Cost on PostgreSQL: one statement in the caller's transaction (the server
    folds identical notifications of a transaction into one); nothing elsewhere.
    """
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        connection.execute(_NOTIFY, {"channel": CHANNEL})


class Listener:
    """``LISTEN`` on a connection of its own; :meth:`wait` ends at a notification.

    Contract: used by one relay thread. The connection is opened on the first
    wait and again after it fails (a restarted database); until then, and on
    a database or driver that cannot listen, :meth:`wait` only sleeps.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._connection: t.Any = None
        #: After a failure, listen again from this time on (monotonic).
        self._retry_at = 0.0
        self._usable = engine.dialect.name == "postgresql" and engine.driver in (
            "psycopg",
            "psycopg2",
        )

    def wait(self, timeout: float, wake: threading.Event) -> None:
        """Return at a notification, when ``wake`` is set, or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            step = min(remaining, _SLICE_SECONDS)
            if not self._usable or time.monotonic() < self._retry_at:
                wake.wait(step)
            elif self._notified(step):
                return

    def close(self) -> None:
        """Close the listening connection, if open."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # closing a broken connection
                connection.close()

    def _notified(self, timeout: float) -> bool:
        try:
            connection = self._connection or self._open()
            readable, _, _ = select.select([connection.fileno()], [], [], timeout)
            return bool(readable) and self._drain(connection)
        except Exception as exc:
            log.info(
                "outbox_listen_failed",
                error_type=type(exc).__name__,
                next="the relay looks every second; it listens again in"
                f" {_RETRY_SECONDS:.0f} s",
            )
            self.close()
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            return False

    def _open(self) -> t.Any:
        pooled = self._engine.raw_connection()
        pooled.detach()  # kept for listening, never handed back to the pool
        connection: t.Any = pooled.dbapi_connection
        connection.autocommit = True
        cursor = connection.cursor()
        cursor.execute(f"LISTEN {CHANNEL}")
        cursor.close()
        self._connection = connection
        return connection

    def _drain(self, connection: t.Any) -> bool:
        """Read what arrived; True when it held a notification."""
        if self._engine.driver == "psycopg2":
            connection.poll()
            notified = bool(connection.notifies)
            connection.notifies.clear()
            return notified
        pgconn = connection.pgconn
        pgconn.consume_input()
        notified = False
        while pgconn.notifies() is not None:
            notified = True
        return notified
