"""Group commit: many threads' single-message calls sent as SQS batch requests."""

from __future__ import annotations

import collections.abc as cabc
import threading
import typing as t

from .wire import MAX_BATCH_ENTRIES

E = t.TypeVar("E")

#: Sends up to ten entries and returns, per entry, None or an error
#: ``(code, message)``. A whole-request failure raises.
SendBatch: t.TypeAlias = cabc.Callable[[list[E]], list[tuple[str, str] | None]]


class _Pending(t.Generic[E]):
    __slots__ = ("done", "entry", "error")

    def __init__(self, entry: E) -> None:
        self.entry = entry
        self.done = False
        self.error: tuple[str, str] | None = None


class GroupCommit(t.Generic[E]):
    """Turn concurrent single-entry calls into batch requests.

    The first caller to arrive sends its entry at once, with whatever else is
    waiting (up to ten entries); callers that arrive while a request is in
    flight wait and go out together in the next one. One thread alone pays no
    extra latency, and sixteen threads share one request per ten entries.
    """

    def __init__(self, send_batch: SendBatch[E]) -> None:
        self._send_batch = send_batch
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._waiting: list[_Pending[E]] = []
        self._sending = False

    def call(self, entry: E) -> tuple[str, str] | None:
        """Send ``entry``; return None on success or the ``(code, message)`` error."""
        pending = _Pending(entry)
        with self._lock:
            self._waiting.append(pending)
            while not pending.done:
                if self._sending:
                    self._idle.wait()
                    continue
                batch = self._waiting[:MAX_BATCH_ENTRIES]
                del self._waiting[:MAX_BATCH_ENTRIES]
                self._sending = True
                self._lock.release()
                results: list[tuple[str, str] | None] = [
                    ("Interrupted", "not sent")
                ] * len(batch)
                try:
                    results = self._send(batch)
                finally:
                    self._lock.acquire()
                    self._sending = False
                    for item, error in zip(batch, results, strict=True):
                        item.error = error
                        item.done = True
                    self._idle.notify_all()
        return pending.error

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
