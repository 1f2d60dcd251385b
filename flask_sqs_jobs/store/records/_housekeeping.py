"""The workers' hourly housekeeping, done by one process of the fleet at a time.

Once an hour per worker, housekeeping deletes old job records (past
``SQS_JOBS_RECORD_RETENTION_SECONDS``), expired idempotency and unique keys,
and the rows of workers not refreshed for
``SQS_JOBS_LOST_WORKER_RETENTION_SECONDS``. With hundreds of workers, every
one of them deleting the same hour of rows would multiply the database's
work; so a worker first takes the store's one housekeeping lease (a permit
of the store's limits, :data:`LEASE_NAME`). It renews the lease while it
prunes (a killed worker's lease ends within :data:`LEASE_SECONDS`), and
when done keeps it for the housekeeping interval: the fleet housekeeps once
an hour, whatever its size. A worker that finds the lease held tries again
after a tenth of the interval. When the lease cannot be read (a store
without the limits table, an error) the worker does the housekeeping anyway:
a late prune is worse than a repeated one.

Records are deleted in batches (``JobRecords.prune(limit=...)``), at most
:data:`STEP_SECONDS` of them per call of :meth:`Housekeeping.step`, so the
thread that calls it (the worker's presence) keeps refreshing its row
between steps, and no statement holds locks for long.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import time
import typing as t

import structlog

from ..model import JobRecords
from ..model import WorkerRegistry

if t.TYPE_CHECKING:
    from ...engine.flow import LimitStore

log = structlog.get_logger(__name__)

#: The store limit whose one permit the housekeeping process holds.
LEASE_NAME = "sqs_jobs_housekeeping"
#: How long the lease lasts without a renewal (each step renews it).
LEASE_SECONDS = 120.0
#: Records deleted per ``prune`` call within a step.
PRUNE_LIMIT = 2000
#: Time spent deleting records per step, at most (seconds).
STEP_SECONDS = 2.0

#: Runs one housekeeping action; False when it failed (logged and counted).
Attempt: t.TypeAlias = cabc.Callable[..., object]


class Housekeeping:
    """Prune the store's old rows, a bounded step at a time, under one lease.

    :param attempt: ``attempt(action, func, *args)`` calls ``func`` and
        returns its result, or None after logging and counting a failure.
    :param limits: the store's limits, for the lease; None: no lease (each
        worker prunes on its own).

    Used by one thread only (the worker's presence), so it takes no lock.
    """

    def __init__(
        self,
        registry: WorkerRegistry,
        *,
        holder: str,
        attempt: Attempt,
        records: JobRecords | None = None,
        forget_expired_keys: cabc.Callable[[], int] | None = None,
        limits: LimitStore | None = None,
        retention: dt.timedelta,
        lost_retention: dt.timedelta,
        every_seconds: float,
        clock: cabc.Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._holder = holder
        self._attempt = attempt
        self._records = records
        self._forget_expired_keys = forget_expired_keys
        self._limits = limits
        self._retention = retention
        self._lost_retention = lost_retention
        self._every = every_seconds
        self._clock = clock
        self._last_run: float | None = None
        self._slot: int | None = None
        #: While records are being pruned: the cutoff, and how many went so far.
        self._cutoff: dt.datetime | None = None
        self._deleted = 0

    @property
    def busy(self) -> bool:
        """Whether records are still being pruned (the next step goes on)."""
        return self._cutoff is not None

    def step(self, now: dt.datetime) -> None:
        """Start the housekeeping when due, or go on with its pruning."""
        if self._cutoff is None:
            due = self._last_run is None or self._clock() - self._last_run >= (
                self._every
            )
            if not due:
                return
            self._last_run = self._clock()
            if not self._take_lease():
                # Another process housekeeps: look again a tenth of the interval on.
                self._last_run -= self._every * 0.9
                return
            self._housekeep(now)
            if self._records is None:
                self._done()
                return
            self._cutoff, self._deleted = now - self._retention, 0
        elif not self._renew_lease():
            log.info("housekeeping_handed_over", deleted=self._deleted)
            self._cutoff = None
            return
        self._prune_for_a_while()

    def stop(self) -> None:
        """Give the lease back if still pruning (a stopping worker), so another
        process takes over; a finished housekeeping keeps it for its interval."""
        if self._cutoff is not None:
            self._cutoff = None
            self._release()

    def _housekeep(self, now: dt.datetime) -> None:
        deleted = self._attempt(
            "prune_workers", self._registry.prune_lost, now - self._lost_retention
        )
        if deleted:
            log.info("lost_workers_pruned", deleted=deleted)
        if self._forget_expired_keys is not None:
            forgotten = self._attempt("forget_keys", self._forget_expired_keys)
            if forgotten:
                log.info("idempotency_keys_forgotten", deleted=forgotten)

    def _prune_for_a_while(self) -> None:
        assert self._records is not None
        assert self._cutoff is not None
        ends = self._clock() + STEP_SECONDS
        while self._clock() < ends:
            deleted = self._attempt(
                "prune", self._records.prune, self._cutoff, PRUNE_LIMIT
            )
            if not isinstance(deleted, int):
                break
            self._deleted += deleted
            if deleted < PRUNE_LIMIT:
                break
        else:
            return
        if self._deleted:
            log.info("job_records_pruned", deleted=self._deleted)
        self._cutoff = None
        self._done()

    def _done(self) -> None:
        """Keep the lease for the interval: no other process housekeeps till then."""
        if self._limits is not None and self._slot is not None:
            try:
                self._limits.renew_permit(
                    LEASE_NAME, "", self._slot, self._holder, self._every
                )
            except Exception:
                self._release()
        self._slot = None

    def _take_lease(self) -> bool:
        """Whether this process housekeeps now: it took the lease, or the lease
        cannot be read; False when another process holds it."""
        if self._limits is None:
            return True
        try:
            self._slot = self._limits.acquire_permit(
                LEASE_NAME, "", 1, self._holder, LEASE_SECONDS
            )
        except Exception as exc:
            log.warning(
                "housekeeping_lease_failed",
                error_type=type(exc).__name__,
                hint="pruning anyway; flask sqs-jobs store init makes the tables",
            )
            return True
        return self._slot is not None

    def _renew_lease(self) -> bool:
        if self._limits is None or self._slot is None:
            return True
        try:
            return self._limits.renew_permit(
                LEASE_NAME, "", self._slot, self._holder, LEASE_SECONDS
            )
        except Exception:
            # The lease runs on; the next step tries again.
            return True

    def _release(self) -> None:
        slot, self._slot = self._slot, None
        if self._limits is None or slot is None:
            return
        try:
            self._limits.release_permit(LEASE_NAME, "", slot, self._holder)
        except Exception as exc:
            log.warning("housekeeping_lease_failed", error_type=type(exc).__name__)
