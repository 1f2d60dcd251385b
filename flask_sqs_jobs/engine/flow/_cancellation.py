"""Cancellation in a worker: a job's tombstone at its start, and while it runs.

A cancelled job has a tombstone in the store (``jobs.cancel``). The worker
reads a job's tombstone once when the job arrives, before it is deferred or
started (jobs arriving together share one read): a tombstoned job is
deleted unrun. While jobs run, one thread per
worker reads the tombstones of all of them in one store call per heartbeat
interval (the shortest interval of the running jobs' leases), not one per
job, and asks each cancelled job to stop (:meth:`Job.request_cancel`).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import threading
import time
import typing as t

import structlog

from ..model import Job
from ._shared_reads import SharedReads

log = structlog.get_logger(__name__)

#: How often the running jobs' tombstones are read when their leases have no
#: heartbeat (a visibility timeout of 0), in seconds.
DEFAULT_INTERVAL = 10.0

#: Reports a failed store call (to ``worker_error``, kind ``"store"``) and the
#: queue it was for (None: the running jobs of every queue at once).
StoreErrors: t.TypeAlias = cabc.Callable[[BaseException, str | None], None]


class Tombstones(t.Protocol):
    """What a worker reads of a store's cancellations."""

    def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
        """The ids among ``job_ids`` that have a tombstone, in one store call."""
        ...


class CancelWatch:
    """A worker's view of cancellations: at a job's arrival, and while it runs.

    One per worker, shared by its slot threads: :meth:`arrived` and
    :meth:`watching` are called on a job's own thread; the watch thread is
    started by the first running job and ends when none runs. Everything it
    holds is under its own condition.

    :param tombstones: the store's cancellations; None: no job is ever
        cancelled, and nothing is read.
    :param report: told of a failed store call; the job goes on.
    """

    def __init__(self, tombstones: Tombstones | None, report: StoreErrors) -> None:
        self._tombstones = tombstones
        self._report = report
        #: The arrivals' reads, shared by the jobs that arrive together.
        self._arrivals = (
            None if tombstones is None else SharedReads(tombstones.cancelled)
        )
        self._cond = threading.Condition()
        #: Running job id -> (job, its heartbeat interval).
        self._running: dict[str, tuple[Job, float]] = {}
        self._thread: threading.Thread | None = None

    def arrived(self, job: Job) -> bool:
        """Whether ``job`` was cancelled before it arrived (a store read made
        after the call, shared with the jobs arriving at the same moment).

        A failing store lets the job run: cancellation is best effort, an
        outage must not stop the work.
        """
        if job.job_id is None or self._arrivals is None:
            return False
        try:
            return self._arrivals.contains(job.job_id)
        except Exception as exc:
            log.warning("cancellation_read_failed", error=str(exc))
            self._report(exc, job.queue)
            return False

    @contextlib.contextmanager
    def watching(self, job: Job, interval: float) -> cabc.Iterator[None]:
        """Watch ``job``'s tombstone while its handler runs, every ``interval``."""
        job_id = job.job_id
        if job_id is None or self._tombstones is None:
            yield
            return
        every = interval if interval > 0 else DEFAULT_INTERVAL
        with self._cond:
            self._running[job_id] = (job, every)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sqs-jobs-cancel-watch", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                if self._running.get(job_id, (None,))[0] is job:
                    del self._running[job_id]
                self._cond.notify_all()

    def _run(self) -> None:
        """The watch thread: one read of every running job's tombstone per interval.

        A job starting or ending wakes it only to recompute the interval (or
        to end), never for an extra read.
        """
        last_read = time.monotonic()
        while True:
            with self._cond:
                while True:
                    if not self._running:
                        self._thread = None
                        return
                    interval = min(seconds for _, seconds in self._running.values())
                    remaining = last_read + interval - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                running = {job_id: job for job_id, (job, _) in self._running.items()}
            last_read = time.monotonic()
            if not running:
                continue
            assert self._tombstones is not None  # no job is watched without
            try:
                cancelled = self._tombstones.cancelled(list(running))
            except Exception as exc:
                log.warning("cancellation_read_failed", error=str(exc))
                self._report(exc, None)
                continue
            for job_id in cancelled:
                job = running[job_id]
                if not job.cancel_requested.is_set():
                    log.info("job_cancel_requested", job_id=job_id, queue=job.queue)
                    job.request_cancel()
