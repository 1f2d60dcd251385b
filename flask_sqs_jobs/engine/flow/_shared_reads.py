"""Concurrent single-key lookups shared as one store read.

Every job reads its own tombstone when it arrives. A receive hands up to ten
jobs to the slots at once, so their reads arrive together: one caller reads
for everyone who is waiting at that moment, and those who arrive while the
read is in flight go together in the next one. Each answer still comes from a
read made after its caller asked, so sharing changes no result, only how many
reads a worker makes (one per batch of arrivals, not one per job).
"""

from __future__ import annotations

import collections.abc as cabc
import threading

#: Reads the keys among those given that are present, in one store call.
ReadMany = cabc.Callable[[list[str]], set[str]]


class _Asked:
    __slots__ = ("answered", "error", "found", "key", "leads", "wake")

    def __init__(self, key: str) -> None:
        self.key = key
        self.found = False
        self.error: BaseException | None = None
        self.answered = False
        #: This caller makes the next read (it found none in flight, or was
        #: handed the turn).
        self.leads = False
        self.wake = threading.Event()


class SharedReads:
    """Answer ``key in store`` for many threads with as few reads as possible.

    Contract: :meth:`contains` is called from any thread. One read is in
    flight at a time; the thread that finds none in flight makes it, for every
    key waiting, then hands the next read to the first caller that came
    meanwhile (so no caller reads for others for long). A failed read raises
    its error in each caller it was for.
    """

    def __init__(self, read_many: ReadMany) -> None:
        self._read_many = read_many
        self._lock = threading.Lock()
        self._waiting: list[_Asked] = []
        self._reading = False

    def contains(self, key: str) -> bool:
        """Whether ``key`` is present, by a read made after this call began."""
        asked = _Asked(key)
        with self._lock:
            self._waiting.append(asked)
            if not self._reading:
                self._reading = asked.leads = True
        if not asked.leads:
            asked.wake.wait()
        if not asked.answered:  # this caller's turn to read
            self._read_for_waiting()
        if asked.error is not None:
            raise asked.error
        return asked.found

    def _read_for_waiting(self) -> None:
        """One read for every caller waiting (this one among them), then the
        turn to the first who came during it, if any."""
        with self._lock:
            batch, self._waiting = self._waiting, []
        try:
            found = self._read_many(list(dict.fromkeys(a.key for a in batch)))
        except Exception as exc:
            for each in batch:
                each.error = exc
        else:
            for each in batch:
                each.found = each.key in found
        for each in batch:
            each.answered = True
        with self._lock:
            if self._waiting:
                successor = self._waiting[0]
                successor.leads = True
                successor.wake.set()
            else:
                self._reading = False
        for each in batch:
            each.wake.set()
