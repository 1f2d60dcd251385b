"""Group commit: many threads' single-message calls sent as SQS batch requests."""

from __future__ import annotations

import collections
import collections.abc as cabc
import threading
import time
import typing as t

from ..model import MAX_BATCH_ENTRIES
from ._errors import call_error

E = t.TypeVar("E")

#: Requests slower than this on average fill their batches while in flight, so
#: a caller's linger is not needed then.
SLOW_REQUEST_SECONDS = 0.004

#: Sends up to ten entries and returns, per entry, None or an error
#: ``(code, message)``. A whole-request failure raises.
SendBatch: t.TypeAlias = cabc.Callable[[list[E]], list[tuple[str, str] | None]]


class _Pending(t.Generic[E]):
    __slots__ = ("done", "entry", "error", "leading", "wake")

    def __init__(self, entry: E) -> None:
        self.entry = entry
        self.done = False
        self.error: tuple[str, str] | None = None
        #: This caller sends batches itself (it leads, or was handed the lead).
        self.leading = False
        # Released once: by whoever sends this entry, or hands it the lead.
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit(t.Generic[E]):
    """Turn concurrent single-entry calls into batch requests.

    The first caller to arrive leads: it sends its entry at once, with
    whatever else is waiting (up to ten entries). Callers that arrive while a
    request is in flight wait and go out together in the next one, sent by
    the next leader. Another request may start beside the one in flight, up to
    ``max_in_flight``, only once a full batch of ten waits: so a long round
    trip (a remote endpoint) does not cap the rate at ten entries per round
    trip, and batches stay full. One thread alone pays no extra latency, and
    each waiter is woken exactly once.

    :param max_in_flight: requests in flight at once, at most.
    """

    def __init__(self, send_batch: SendBatch[E], max_in_flight: int = 1) -> None:
        self._send_batch = send_batch
        self._max_in_flight = max_in_flight
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Pending[E]] = collections.deque()
        #: A full batch is waiting (wakes a leader that lingers).
        self._arrived = threading.Condition(self._lock)
        #: A request completed (wakes a leader whose entry another one sent).
        self._completed = threading.Condition(self._lock)
        self._leaders = 0
        #: Running average of a request's round trip, in seconds.
        self._seconds = 0.0

    def call(self, entry: E, linger: float = 0.0) -> tuple[str, str] | None:
        """Send ``entry``; return None on success or the ``(code, message)`` error.

        :param linger: when this call leads, how long it may wait for more
            entries before sending a batch that is not full (seconds); ignored
            while requests are slow, as batches then fill in flight.
        """
        me = _Pending(entry)
        with self._lock:
            self._waiting.append(me)
            full = len(self._waiting) >= MAX_BATCH_ENTRIES
            if self._leaders == 0 or (full and self._leaders < self._max_in_flight):
                self._leaders += 1
                me.leading = True
            elif full:
                self._arrived.notify()
        if not me.leading:
            me.wake.acquire()
            if not me.leading:
                return me.error
        if self._seconds >= SLOW_REQUEST_SECONDS:
            linger = 0.0
        try:
            self._lead(me, linger)
        finally:
            with self._lock:
                if not me.done and me in self._waiting:  # interrupted
                    self._waiting.remove(me)
                successor = next((p for p in self._waiting if not p.leading), None)
                if successor is not None:
                    successor.leading = True
                    successor.wake.release()
                else:
                    self._leaders -= 1
        return me.error

    def _lead(self, me: _Pending[E], linger: float) -> None:
        """Send batches from the front of the queue until ``me`` is sent."""
        while True:
            with self._lock:
                if me.done:
                    return
                if linger > 0 and len(self._waiting) < MAX_BATCH_ENTRIES:
                    self._arrived.wait_for(
                        lambda: len(self._waiting) >= MAX_BATCH_ENTRIES, linger
                    )
                count = min(MAX_BATCH_ENTRIES, len(self._waiting))
                if count == 0:
                    # Our entry travels in another leader's request.
                    self._completed.wait_for(lambda: me.done)
                    return
                batch = [self._waiting.popleft() for _ in range(count)]
            self._send_and_report(batch, me)

    def _send_and_report(self, batch: list[_Pending[E]], me: _Pending[E]) -> None:
        results: list[tuple[str, str] | None] = [("Interrupted", "not sent")] * len(
            batch
        )
        started = time.monotonic()
        try:
            results = self._send(batch)
        finally:
            with self._lock:
                self._seconds += 0.2 * (time.monotonic() - started - self._seconds)
                for item, error in zip(batch, results, strict=True):
                    item.error = error
                    item.done = True
                    if item is not me and not item.leading:
                        item.wake.release()
                self._completed.notify_all()

    def _send(self, batch: list[_Pending[E]]) -> list[tuple[str, str] | None]:
        try:
            return self._send_batch([item.entry for item in batch])
        except Exception as exc:
            return [call_error(exc)] * len(batch)
