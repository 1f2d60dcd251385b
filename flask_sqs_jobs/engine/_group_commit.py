"""Group commit: many threads' single-message calls sent as SQS batch requests."""

from __future__ import annotations

import collections
import collections.abc as cabc
import itertools
import threading
import time
import typing as t

from ._wire import MAX_BATCH_ENTRIES

E = t.TypeVar("E")

#: Batch requests slower than this on average are sent on several lanes at once.
SLOW_REQUEST_SECONDS = 0.004

#: Sends up to ten entries and returns, per entry, None or an error
#: ``(code, message)``. A whole-request failure raises.
SendBatch: t.TypeAlias = cabc.Callable[[list[E]], list[tuple[str, str] | None]]


class _Pending(t.Generic[E]):
    __slots__ = ("done", "entry", "error", "wake")

    def __init__(self, entry: E) -> None:
        self.entry = entry
        self.done = False
        self.error: tuple[str, str] | None = None
        # Released by whoever sends this entry, or hands it the lead.
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit(t.Generic[E]):
    """Turn concurrent single-entry calls into batch requests.

    The first caller to arrive leads: it sends its entry at once, with
    whatever else is waiting (up to ten entries). Callers that arrive while a
    request is in flight wait and go out together in the next one, sent by
    the next leader. One thread alone pays no extra latency, sixteen threads
    share one request per ten entries, and each waiter is woken exactly once.
    """

    def __init__(self, send_batch: SendBatch[E]) -> None:
        self._send_batch = send_batch
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Pending[E]] = collections.deque()
        self._arrived = threading.Condition(self._lock)
        self._sending = False

    def call(self, entry: E, linger: float = 0.0) -> tuple[str, str] | None:
        """Send ``entry``; return None on success or the ``(code, message)`` error.

        :param linger: when this call leads, how long it may wait for more
            entries before sending a batch that is not full (seconds).
        """
        me = _Pending(entry)
        with self._lock:
            self._waiting.append(me)
            lead = not self._sending
            self._sending = True
            if len(self._waiting) >= MAX_BATCH_ENTRIES:
                self._arrived.notify()
        if not lead:
            me.wake.acquire()
            if me.done:
                return me.error
        try:
            while not me.done:
                self._send_next_batch(me, linger)
        finally:
            with self._lock:
                if not me.done:  # interrupted before our own entry went out
                    self._waiting.remove(me)
                if self._waiting:
                    self._waiting[0].wake.release()  # the next leader
                else:
                    self._sending = False
        return me.error

    def _send_next_batch(self, me: _Pending[E], linger: float) -> None:
        with self._lock:
            if linger > 0 and len(self._waiting) < MAX_BATCH_ENTRIES:
                self._arrived.wait_for(
                    lambda: len(self._waiting) >= MAX_BATCH_ENTRIES, linger
                )
            count = min(MAX_BATCH_ENTRIES, len(self._waiting))
            batch = [self._waiting.popleft() for _ in range(count)]
        results: list[tuple[str, str] | None] = [("Interrupted", "not sent")] * count
        try:
            results = self._send(batch)
        finally:
            for item, error in zip(batch, results, strict=True):
                item.error = error
                item.done = True
                if item is not me:
                    item.wake.release()

    def _send(self, batch: list[_Pending[E]]) -> list[tuple[str, str] | None]:
        try:
            return self._send_batch([item.entry for item in batch])
        except Exception as exc:
            error = (error_code(exc), str(exc))
            return [error] * len(batch)


class ShardedGroupCommit(t.Generic[E]):
    """Several :class:`GroupCommit` lanes, so batch requests travel in parallel.

    One lane sends one request at a time; when a request's round trip is long
    (an SQS endpoint in another zone, a slow network), one lane caps the rate
    at ten entries per round trip. While requests take longer than
    :data:`SLOW_REQUEST_SECONDS` on average, calling threads spread over every
    lane (each thread keeps to its own); on a fast endpoint they all share the
    first lane, whose batches then fill best.
    """

    def __init__(self, send_batch: SendBatch[E], lanes: int = 4) -> None:
        self._send_batch = send_batch
        self._lanes = [GroupCommit(self._timed_send) for _ in range(lanes)]
        self._next = itertools.count()
        self._mine = threading.local()
        self._seconds = 0.0

    def call(self, entry: E, linger: float = 0.0) -> tuple[str, str] | None:
        """Send ``entry``; see :meth:`GroupCommit.call`."""
        index: int | None = getattr(self._mine, "index", None)
        if index is None:
            index = self._mine.index = next(self._next)
        if self._seconds < SLOW_REQUEST_SECONDS:
            index = 0
        else:
            linger = 0.0  # slow requests fill their batches while in flight
        return self._lanes[index % len(self._lanes)].call(entry, linger)

    def _timed_send(self, entries: list[E]) -> list[tuple[str, str] | None]:
        started = time.monotonic()
        try:
            return self._send_batch(entries)
        finally:
            elapsed = time.monotonic() - started
            self._seconds += 0.2 * (elapsed - self._seconds)


def error_code(exc: BaseException) -> str:
    """Return the AWS error code of a botocore error, or the exception's type name."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error")
        if isinstance(error, dict):
            code = error.get("QueryErrorCode") or error.get("Code")
            if isinstance(code, str) and code:
                return code
    return type(exc).__name__
