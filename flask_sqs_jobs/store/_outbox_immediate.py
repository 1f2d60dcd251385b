"""The immediate send: committed outbox rows go to SQS at once, off the app's thread.

A commit hands its rows' ids to one sender thread per (engine, queue group)
and returns; the thread claims those rows (a row the relay already took is
not found), sends them with SendMessageBatch and deletes them. A failure is
logged, the rows are backed off for the relay, and this process's relay is
woken; the app never sees it.
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

from . import _outbox_rows
from ._outbox_send import send_claimed

if t.TYPE_CHECKING:
    from ..engine._queue_group import QueueGroup

log = structlog.get_logger(__name__)

#: Rows claimed per transaction.
_CLAIM_LIMIT = 100
#: A sender thread with nothing to do for this long ends (a new one starts
#: on demand), so idle groups and engines can be collected.
_IDLE_EXIT_SECONDS = 30.0
#: How long the interpreter's exit waits for sends in flight.
_EXIT_FLUSH_SECONDS = 5.0

#: Set when an immediate send failed: the relay of this process takes over.
relay_wakeup = threading.Event()


class ImmediateSender:
    """One thread sending the rows that commits hand it, oldest first."""

    def __init__(self, engine: sa.Engine, group: QueueGroup) -> None:
        self.engine = engine
        self.group = group
        self._ids: queue_module.SimpleQueue[list[int]] = queue_module.SimpleQueue()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Submitted id lists not handled yet.
        self._busy = 0

    def submit(self, ids: list[int]) -> None:
        with self._lock:
            self._busy += 1
            self._ids.put(ids)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="sqs-jobs-outbox-send", daemon=True
                )
                self._thread.start()

    def flush(self, timeout: float) -> bool:
        """Wait until every submitted row was handled; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._busy, timeout)

    def _run(self) -> None:
        while True:
            try:
                batches = [self._ids.get(timeout=_IDLE_EXIT_SECONDS)]
            except queue_module.Empty:
                with self._lock:
                    if self._ids.empty():
                        self._thread = None
                        return
                continue
            while not self._ids.empty():
                batches.append(self._ids.get_nowait())
            ids = [row_id for batch in batches for row_id in batch]
            try:
                for start in range(0, len(ids), _CLAIM_LIMIT):
                    self._send(ids[start : start + _CLAIM_LIMIT])
            finally:
                with self._lock:
                    self._busy -= len(batches)
                    self._lock.notify_all()

    def _send(self, ids: list[int]) -> None:
        try:
            with self.engine.connect() as connection:
                _outbox_rows.begin_locked(connection)
                rows = _outbox_rows.claim(connection, limit=len(ids), ids=ids)
                report = send_claimed(connection, self.group, rows, "immediate")
                connection.commit()
        except Exception as exc:
            log.warning(
                "outbox_immediate_send_failed",
                rows=len(ids),
                error=repr(exc),
                next="the relay sends them",
            )
            relay_wakeup.set()
            return
        if report.failed:
            relay_wakeup.set()


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
            sender = _senders[key] = ImmediateSender(engine, group)
        return sender


def flush_all(timeout: float = _EXIT_FLUSH_SECONDS) -> bool:
    """Wait for every sender of this process; what is left goes to the relay."""
    with _senders_lock:
        senders = list(_senders.values()) if _senders_pid == os.getpid() else []
    deadline = time.monotonic() + timeout
    return all(s.flush(max(0.0, deadline - time.monotonic())) for s in senders)


atexit.register(flush_all)
