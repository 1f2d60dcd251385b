"""The immediate send: committed outbox rows go to SQS at once, off the app's thread.

A commit hands its rows to one sender thread per (engine, queue group) and
returns; the thread sends them with SendMessageBatch and deletes them. On
PostgreSQL it first locks them (a row the relay already took is not found);
on SQLite, whose only lock is the whole database's, it relies on the grace
period the relay leaves fresh rows. A failure is logged, the rows are backed
off for the relay, and this process's relay is woken; the app never sees it.
"""

from __future__ import annotations

import atexit
import os
import queue as queue_module
import threading
import time
import typing as t

import sqlalchemy as sa
import structlog

from ...engine.model import MAX_BATCH_ENTRIES
from . import _rows as _outbox_rows
from ._claim import claim
from ._claim import in_group_order
from ._rows import OutboxRow
from ._send import describe_error
from ._send import send_claimed
from ._send import send_rows
from ._send import SendReport
from ._send import write_back

if t.TYPE_CHECKING:
    from ...engine import QueueGroup

log = structlog.get_logger(__name__)

#: Rows claimed per transaction.
_CLAIM_LIMIT = 100
#: A sender thread with nothing to do for this long ends (a new one starts
#: on demand), so idle groups and engines can be collected.
_IDLE_EXIT_SECONDS = 30.0
#: How long a send waits for more commits to fill its request. Sending each
#: commit's rows alone would cost the app's threads more (the GIL).
_LINGER_SECONDS = 0.005
#: How long the interpreter's exit waits for sends in flight.
_EXIT_FLUSH_SECONDS = 5.0

#: Set when an immediate send failed: the relay of this process takes over.
relay_wakeup = threading.Event()


class ImmediateSender:
    """One thread sending the rows that commits hand it, oldest first.

    Contract: :meth:`submit` is called by the outermost commit of an app's
    session (through the outbox's ``AfterCommit`` holder), in the app's
    thread, and returns at once; the sender's own thread (started on
    demand, ended after 30 idle seconds) owns the rows from then on: it
    sends them through the produce pipeline's batch sink, deletes the sent
    ones and backs off the others for the relay. ``_lock`` guards only the
    count of submitted lists and the thread's start; no database lock is
    held while a request travels on SQLite.
    """

    def __init__(self, engine: sa.Engine, group: QueueGroup) -> None:
        self.engine = engine
        self.group = group
        self._rows: queue_module.SimpleQueue[list[OutboxRow]] = (
            queue_module.SimpleQueue()
        )
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Submitted row lists not handled yet.
        self._busy = 0

    def submit(self, rows: list[OutboxRow]) -> None:
        """Queue ``rows`` (just committed) for sending; start the thread if needed."""
        with self._lock:
            self._busy += 1
            self._rows.put(rows)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="sqs-jobs-outbox-send", daemon=True
                )
                self._thread.start()

    def idle(self) -> bool:
        """Nothing to send and no thread running."""
        with self._lock:
            return not self._busy and (
                self._thread is None or not self._thread.is_alive()
            )

    def flush(self, timeout: float) -> bool:
        """Wait until every submitted row was handled; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._busy, timeout)

    def _run(self) -> None:
        """The sender's thread: take what commits handed in, send it, repeat."""
        while True:
            try:
                batches = [self._rows.get(timeout=_IDLE_EXIT_SECONDS)]
            except queue_module.Empty:
                with self._lock:
                    if self._rows.empty():
                        self._thread = None
                        return
                continue
            self._linger(batches)
            rows = [row for batch in batches for row in batch]
            try:
                for start in range(0, len(rows), _CLAIM_LIMIT):
                    self._send(rows[start : start + _CLAIM_LIMIT])
            finally:
                with self._lock:
                    self._busy -= len(batches)
                    self._lock.notify_all()

    def _linger(self, batches: list[list[OutboxRow]]) -> None:
        """Gather the commits of the next few milliseconds into the same request."""
        count = len(batches[0])
        deadline = time.monotonic() + _LINGER_SECONDS
        while count < MAX_BATCH_ENTRIES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batches.append(self._rows.get(timeout=remaining))
            except queue_module.Empty:
                break
            count += len(batches[-1])
        while not self._rows.empty():
            batches.append(self._rows.get_nowait())

    def _send(self, rows: list[OutboxRow]) -> None:
        """Send and settle ``rows``; a failure is logged and left to the relay."""
        try:
            report = self._send_rows(rows)
        except Exception as exc:
            log.warning(
                "outbox_immediate_send_failed",
                rows=len(rows),
                error=describe_error(exc),
                next="the relay sends them",
            )
            relay_wakeup.set()
            return
        if report.failed:
            relay_wakeup.set()

    def _send_rows(self, rows: list[OutboxRow]) -> SendReport:
        """One connection's work for ``rows``: lock (PostgreSQL), send, write back."""
        with self.engine.connect() as connection:
            if connection.dialect.name != "sqlite":
                # Row locks: the relay skips these rows while they are sent,
                # and a row the relay already sent is not found.
                _outbox_rows.begin_locked(connection)
                ids = [row.id for row in rows]
                rows = claim(connection, limit=len(ids), ids=ids).rows
                report = send_claimed(
                    connection,
                    self.group,
                    rows,
                    "immediate",
                    max_attempts=_outbox_rows.max_attempts_of(self.group),
                )
                connection.commit()
                return report
            # SQLite locks the whole database: never hold its write lock
            # across the send, which would stall the app's own writes. Take
            # it briefly to lease the rows (the relay then leaves them alone,
            # however long the send takes), and again to delete them.
            _outbox_rows.begin_locked(connection)
            if any(row.message_group_id is not None for row in rows):
                # An earlier row of the group still waits: the relay sends
                # this one after it.
                rows = in_group_order(connection, rows)
            rows = _outbox_rows.lease(connection, rows)
            connection.commit()
            report = send_rows(self.group, rows, "immediate")
            _outbox_rows.begin_locked(connection)
            write_back(
                connection,
                rows,
                report,
                "immediate",
                max_attempts=_outbox_rows.max_attempts_of(self.group),
            )
            connection.commit()
            return report


_senders: dict[tuple[int, int], ImmediateSender] = {}
_senders_lock = threading.Lock()
_senders_pid = os.getpid()


def sender_for(engine: sa.Engine, group: QueueGroup) -> ImmediateSender:
    """This process's sender for ``engine`` and ``group`` (new ones after a fork)."""
    global _senders_pid
    key = (id(engine), id(group))
    with _senders_lock:
        if _senders_pid != os.getpid():
            _senders.clear()
            _senders_pid = os.getpid()
        sender = _senders.get(key)
        if sender is None or sender.engine is not engine or sender.group is not group:
            for stale in [k for k, s in _senders.items() if s.idle()]:
                del _senders[stale]  # lets idle engines and groups be collected
            sender = _senders[key] = ImmediateSender(engine, group)
        return sender


def flush_all(timeout: float = _EXIT_FLUSH_SECONDS) -> bool:
    """Wait for every sender of this process; what is left goes to the relay."""
    with _senders_lock:
        senders = list(_senders.values()) if _senders_pid == os.getpid() else []
    deadline = time.monotonic() + timeout
    return all(s.flush(max(0.0, deadline - time.monotonic())) for s in senders)


atexit.register(flush_all)
