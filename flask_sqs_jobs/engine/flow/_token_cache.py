"""A worker's tokens taken ahead: one store call for several starts of a fast limit.

A rate limit fast enough (see :func:`batch_ceiling`) is taken from the store
a few tokens at a time; the worker keeps the extra ones for the next jobs of
the same limit and key, for at most :func:`hold_seconds`, then drops them.
How many one take asks for adapts to the worker's own demand: twice as many
as last time when the last batch was all spent, half as many when tokens
were dropped, so a worker that starts one job now and then asks for one.
"""

from __future__ import annotations

import collections
import threading
import time
import typing as t

import structlog

from ..model import loggable_text
from ._limit_specs import RateLimit
from ._limit_store import LimitStore
from ._token_bucket import batch_ceiling
from ._token_bucket import hold_seconds

log = structlog.get_logger(__name__)

#: Above this many (limit, key) entries, the empty ones are forgotten.
_PRUNE_ABOVE = 1000


class _Entry:
    """The tokens held for one (limit, key): batches of [count, deadline]."""

    __slots__ = ("batches", "dropped", "refused_until", "size", "taking", "waiting")

    def __init__(self) -> None:
        self.batches: collections.deque[list[float]] = collections.deque()
        self.size = 0
        self.dropped = False
        #: Whether a thread is taking a batch from the store for this entry.
        self.taking = False
        #: Threads waiting for that batch.
        self.waiting = 0
        #: Until when the store said the bucket is empty (no take ahead then).
        self.refused_until = 0.0

    def held(self) -> int:
        """How many tokens are held (some may be past their deadline)."""
        return int(sum(batch[0] for batch in self.batches))

    def spend(self, now: float) -> bool:
        """Spend one held token that is still in time; False: none is."""
        while self.batches and self.batches[0][1] <= now:
            self.batches.popleft()
            self.dropped = True
        if not self.batches:
            return False
        batch = self.batches[0]
        batch[0] -= 1
        if batch[0] <= 0:
            self.batches.popleft()
        return True

    def next_size(self, most: int) -> int:
        """How many tokens the next take asks for: at least one for each
        thread waiting now."""
        if self.dropped:
            self.size = max(1, self.size // 2)
        else:
            self.size = min(most, max(1, self.size * 2))
        self.dropped = False
        return min(most, max(self.size, 1 + self.waiting))


class TokenCache:
    """Takes tokens for a worker's jobs, a batch at a time where the limit allows.

    One per worker gate, shared by its slot threads; its entries are under
    its own condition, never held during a store call.
    """

    def __init__(
        self, store: LimitStore, clock: t.Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._clock = clock
        self._cond = threading.Condition()
        self._entries: dict[tuple[str, str], _Entry] = {}

    def take(self, limit: RateLimit, key: str) -> float:
        """Take one token of ``limit`` for ``key``: 0, or the seconds until one.

        One thread at a time takes a batch for a (limit, key); the others
        that find no token wait for its batch rather than asking too (and
        the next batch counts them). When a spent token leaves fewer than
        half a batch held, the next batch is taken ahead, on a thread of its
        own, so that the jobs after it find tokens waiting.
        """
        most = batch_ceiling(limit)
        if most == 1:
            return self._store.take_token(limit.name, key, limit.limit, limit.per)
        with self._cond:
            entry = self._entry(limit.name, key)
            while True:
                now = self._clock()
                if entry.spend(now):
                    ahead = (
                        not entry.taking
                        and now >= entry.refused_until
                        and 2 * entry.held() < entry.size
                    )
                    if not ahead:
                        return 0.0
                    entry.taking = True
                    want = entry.next_size(most)
                    break
                if not entry.taking:
                    entry.taking = True
                    want = entry.next_size(most)
                    return self._fill(limit, key, entry, want, now, keep=False)
                entry.waiting += 1
                self._cond.wait(hold_seconds(limit))
                entry.waiting -= 1
        threading.Thread(
            target=self._fill_ahead,
            args=(limit, key, entry, want, now),
            name="sqs-jobs-tokens",
            daemon=True,
        ).start()
        return 0.0

    def _fill_ahead(
        self, limit: RateLimit, key: str, entry: _Entry, want: int, now: float
    ) -> None:
        try:
            self._fill(limit, key, entry, want, now, keep=True)
        except Exception as exc:
            # The next job that finds no token asks the store itself, and reports.
            log.warning("limit_check_failed", error=loggable_text(str(exc), 1000))

    def _fill(
        self,
        limit: RateLimit,
        key: str,
        entry: _Entry,
        want: int,
        started: float,
        keep: bool,
    ) -> float:
        """Take ``want`` tokens into ``entry`` (all of them when ``keep``, else
        all but the caller's); 0, or the seconds until a token is there."""
        taken, wait = 0, 0.0
        try:
            taken, wait = self._store.take_tokens(
                limit.name, key, limit.limit, limit.per, want
            )
        finally:
            with self._cond:
                entry.taking = False
                spare = taken if keep else taken - 1
                if spare > 0:
                    # The deadline counts from before the call: never after the take.
                    deadline = started + hold_seconds(limit)
                    entry.batches.append([float(spare), deadline])
                if not taken:
                    entry.refused_until = started + wait
                self._cond.notify_all()
        return 0.0 if taken else wait

    def _entry(self, name: str, key: str) -> _Entry:
        entry = self._entries.get((name, key))
        if entry is None:
            if len(self._entries) >= _PRUNE_ABOVE:
                unused = [k for k, e in self._entries.items() if not e.batches]
                for name_key in unused:
                    if not self._entries[name_key].taking:
                        del self._entries[name_key]
            entry = self._entries[(name, key)] = _Entry()
        return entry
