"""Group commit: many threads' single-message calls sent as SQS batch requests."""

from __future__ import annotations

import collections
import collections.abc as cabc
import threading
import typing as t

from ._wire import MAX_BATCH_ENTRIES

E = t.TypeVar("E")

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
        self._sending = False

    def call(self, entry: E) -> tuple[str, str] | None:
        """Send ``entry``; return None on success or the ``(code, message)`` error."""
        me = _Pending(entry)
        with self._lock:
            self._waiting.append(me)
            lead = not self._sending
            self._sending = True
        if not lead:
            me.wake.acquire()
            if me.done:
                return me.error
        try:
            while not me.done:
                self._send_next_batch(me)
        finally:
            with self._lock:
                if not me.done:  # interrupted before our own entry went out
                    self._waiting.remove(me)
                if self._waiting:
                    self._waiting[0].wake.release()  # the next leader
                else:
                    self._sending = False
        return me.error

    def _send_next_batch(self, me: _Pending[E]) -> None:
        with self._lock:
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
