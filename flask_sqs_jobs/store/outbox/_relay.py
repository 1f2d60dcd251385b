"""The outbox relay: send every row the immediate send after commit did not.

It drains a backlog pass after pass (each pass one transaction holding its
rows' locks), and when the outbox is idle checks it again every second, or
at once when this process's immediate send failed or (PostgreSQL) a commit
notified it. With a
:class:`~._relay_lease.RelayLease` it runs only while it holds one of the
fleet's ``SQS_JOBS_OUTBOX_RELAYS`` slots, and stands by otherwise.
"""

from __future__ import annotations

import threading
import typing as t

import sqlalchemy as sa
import structlog

from . import _rows as _outbox_rows
from ._claim import claim
from ._immediate import relay_wakeup
from ._notify import Listener
from ._relay_lease import RelayLease
from ._relay_lease import STANDBY_SECONDS
from ._send import describe_error
from ._send import send_claimed

if t.TYPE_CHECKING:
    from ...engine import QueueGroup

log = structlog.get_logger(__name__)

#: Rows claimed (and locked) per pass.
CLAIM_LIMIT = 100
#: How often an idle relay looks at the outbox again.
IDLE_SECONDS = 1.0
#: How long a relay whose database fails waits before trying again.
ERROR_BACKOFF_SECONDS = 5.0


class OutboxRelay:
    """Send the outbox's rows with ``group``, reading them through ``engine``.

    Several relays (in several processes) may run at once: each pass locks
    the rows it sends, so in normal operation every row is sent once.

    Contract: a worker service (``start``/``stop`` from the worker's
    services, in that order) or ``flask sqs-jobs outbox relay`` (``run`` or
    ``drain`` in the command's thread). Each pass is one transaction that
    holds its rows' locks while the rows travel, through the produce
    pipeline's batch sink, and reports each one sent (``via="relay"``).
    ``request_stop`` may be called from any thread (a signal's handler).
    """

    name = "outbox_relay"

    def __init__(
        self,
        engine: sa.Engine,
        group: QueueGroup,
        *,
        claim_limit: int = CLAIM_LIMIT,
        idle_seconds: float = IDLE_SECONDS,
        max_attempts: int | None = None,
        lease: RelayLease | None = None,
    ) -> None:
        self.engine = engine
        #: The fleet's relay slot this relay needs to run, or None (always runs).
        self.lease = lease
        self.group = group
        self.claim_limit = claim_limit
        #: Failed sends after which a row is parked (SQS_JOBS_OUTBOX_MAX_ATTEMPTS);
        #: by default what :func:`~._rows.set_max_attempts` said for ``group``.
        self.max_attempts = (
            _outbox_rows.max_attempts_of(group)
            if max_attempts is None
            else max_attempts
        )
        self.idle_seconds = idle_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener = Listener(engine)

    def run_pass(self, *, include_fresh: bool = False) -> int:
        """Claim, send and write back one batch of rows; return how many were handled.

        Handled: sent, failed (backing off or parked), or parked unread.

        :param include_fresh: also rows committed moments ago that the send
            after commit does not hold (``relay --once``).
        """
        with self.engine.connect() as connection:
            _outbox_rows.begin_locked(connection)
            claimed = claim(
                connection, limit=self.claim_limit, include_fresh=include_fresh
            )
            if not claimed.rows:
                if claimed.parked or claimed.pushed:
                    connection.commit()
                else:
                    connection.rollback()
                return claimed.parked
            report = send_claimed(
                connection,
                self.group,
                claimed.rows,
                "relay",
                max_attempts=self.max_attempts,
            )
            connection.commit()
        return report.handled + claimed.parked

    def drain(self) -> int:
        """Run passes until none finds a row to send; return the rows sent.

        Rows backing off after a failed send are left for a later run.
        """
        sent = 0
        while not self._stop.is_set():
            handled = self.run_pass(include_fresh=True)
            if not handled:
                break
            sent += handled
        return sent

    def run(self) -> None:
        """Relay until :meth:`stop`; database errors are logged and retried."""
        log.info("outbox_relay_started", store=self.engine.url.render_as_string())
        try:
            self._relay_until_stopped()
        finally:
            self._listener.close()
            if self.lease is not None:
                self.lease.release()
        log.info("outbox_relay_stopped")

    def _relay_until_stopped(self) -> None:
        while not self._stop.is_set():
            if self.lease is not None and not self.lease.active():
                self._stop.wait(STANDBY_SECONDS)
                continue
            try:
                handled = self.run_pass()
            except Exception as exc:
                log.warning(
                    "outbox_relay_failed",
                    error=describe_error(exc),
                    retry_in_seconds=ERROR_BACKOFF_SECONDS,
                )
                self._stop.wait(ERROR_BACKOFF_SECONDS)
                continue
            if handled:
                continue
            self._wait_idle()

    def _wait_idle(self) -> None:
        """Wait a second, or less: when this process's immediate send failed,
        or (PostgreSQL) a commit left rows to the relays (:mod:`._notify`)."""
        self._listener.wait(self.idle_seconds, relay_wakeup)
        if relay_wakeup.is_set():
            relay_wakeup.clear()

    # -- as a worker service --

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread of its own."""
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, name="sqs-jobs-outbox-relay", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread :meth:`start` began and wait for its pass to end."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def request_stop(self) -> None:
        """Ask :meth:`run` or :meth:`drain` to return after the current pass."""
        self._stop.set()
        relay_wakeup.set()
