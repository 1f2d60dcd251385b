"""A worker's concurrency permits between jobs: kept a moment for the next job.

A permit a job returns is not given back to the store at once: the worker
keeps it, still leased in the store under the worker's name for it, and the
next job of the same limit and key that starts within :data:`IDLE_SECONDS`
takes it without a store call. The bound holds (one job per permit, and no
more permits than ``limit`` across every process); what the worker keeps,
no other process can take meanwhile, so a permit goes back to the store once
it has been idle for :data:`IDLE_SECONDS` (a thread of the pool's does that),
and at the end of the first job that ends :data:`TENURE_SECONDS` or more
after the worker took it from the store, so that a busy worker lets others
in. A worker that dies leaves its permits to their lease's end, as a job's.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import threading
import time
import uuid
import weakref

import structlog

from ..model import loggable_text
from ._limit_store import LimitStore

log = structlog.get_logger(__name__)

#: How long a returned permit waits for the worker's next job.
IDLE_SECONDS = 0.1
#: How long a worker keeps reusing a permit before giving it back to the store.
TENURE_SECONDS = 1.0


@dataclasses.dataclass
class PooledPermit:
    """One slot of ``(name, key)`` that this worker holds in the store."""

    name: str
    key: str
    slot: int
    holder: str
    #: The store's lease end, on this process's monotonic clock.
    expires: float
    #: When the worker took it from the store (monotonic).
    taken_at: float
    #: When it was last returned by a job (monotonic); 0 while a job holds it.
    idle_since: float = 0.0
    #: Whether a renewal found it held by someone else.
    lost: bool = False


def _give_back(store: LimitStore, permits: cabc.Iterable[PooledPermit]) -> None:
    for permit in permits:
        try:
            store.release_permit(permit.name, permit.key, permit.slot, permit.holder)
        except Exception as exc:
            log.warning(
                "limit_release_failed",
                limit=permit.name,
                error=loggable_text(str(exc), 1000),
            )


class PermitPool:
    """The permits a worker holds between jobs, under its own condition.

    Shared by a worker's slot threads; store calls are made with no lock
    held. Idle permits are given back by a daemon thread (started while any
    is idle) and when the pool is collected or the process exits.
    """

    def __init__(self, store: LimitStore) -> None:
        self._store = store
        self._cond = threading.Condition()
        self._idle: dict[tuple[str, str], list[PooledPermit]] = {}
        self._thread: threading.Thread | None = None
        self._name = uuid.uuid4().hex[:12]
        weakref.finalize(self, _give_back_all, store, self._idle)

    def acquire(
        self, name: str, key: str, limit: int, lease_seconds: float
    ) -> PooledPermit | None:
        """A permit for one job: one kept idle (leased for at least half of
        ``lease_seconds`` more), else a new one from the store; None: all
        ``limit`` are held."""
        now = time.monotonic()
        stale: list[PooledPermit] = []
        found = None
        with self._cond:
            idle = self._idle.get((name, key), [])
            while idle and found is None:
                permit = idle.pop()
                if permit.slot < limit and permit.expires - now >= lease_seconds / 2:
                    permit.idle_since = 0.0
                    found = permit
                else:
                    stale.append(permit)
        _give_back(self._store, stale)
        if found is not None:
            return found
        holder = f"{self._name}/{uuid.uuid4().hex[:12]}"
        slot = self._store.acquire_permit(name, key, limit, holder, lease_seconds)
        if slot is None:
            return None
        return PooledPermit(name, key, slot, holder, now + lease_seconds, now)

    def renew(self, permit: PooledPermit, lease_seconds: float) -> bool:
        """Push ``permit``'s lease on; False when it was lost."""
        now = time.monotonic()
        renewed = self._store.renew_permit(
            permit.name, permit.key, permit.slot, permit.holder, lease_seconds
        )
        if renewed:
            permit.expires = now + lease_seconds
        else:
            permit.lost = True
        return renewed

    def release(self, permit: PooledPermit, keep: bool = True) -> None:
        """Return ``permit`` from its job: kept for the next one, or given back."""
        now = time.monotonic()
        if not keep or permit.lost or now - permit.taken_at >= TENURE_SECONDS:
            self._store.release_permit(
                permit.name, permit.key, permit.slot, permit.holder
            )
            return
        with self._cond:
            permit.idle_since = now
            self._idle.setdefault((permit.name, permit.key), []).append(permit)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._sweep, name="sqs-jobs-permits", daemon=True
                )
                self._thread.start()

    def _sweep(self) -> None:
        """Give back the permits idle for :data:`IDLE_SECONDS`; end when none is."""
        while True:
            with self._cond:
                now = time.monotonic()
                due: list[PooledPermit] = []
                soonest = None
                for name_key, permits in list(self._idle.items()):
                    kept = [p for p in permits if p.idle_since + IDLE_SECONDS > now]
                    due.extend(p for p in permits if p.idle_since + IDLE_SECONDS <= now)
                    if kept:
                        self._idle[name_key] = kept
                        first = min(p.idle_since for p in kept) + IDLE_SECONDS
                        soonest = first if soonest is None else min(soonest, first)
                    else:
                        del self._idle[name_key]
                if not due and soonest is None:
                    self._thread = None
                    return
            _give_back(self._store, due)
            if soonest is not None:
                time.sleep(max(0.0, soonest - time.monotonic()))


def _give_back_all(
    store: LimitStore, idle: dict[tuple[str, str], list[PooledPermit]]
) -> None:
    permits = [permit for kept in list(idle.values()) for permit in kept]
    idle.clear()
    _give_back(store, permits)
