"""A worker's shutdown: release held messages, wait for (or abandon) running jobs."""

from __future__ import annotations

import collections.abc as cabc
import time
import typing as t

import structlog

from ._heartbeat import Heartbeat
from ._receiver import Receiver
from ._release import release_leases
from ._worker_state import WorkerState

log = structlog.get_logger("flask_sqs_jobs.engine.worker._worker")

#: After the shutdown deadline, how long aborted handlers may take to return.
ABORT_GRACE_SECONDS = 2.0


class Joinable(t.Protocol):
    def join(self) -> None: ...


class Shutdown:
    """The end of a worker's run, in order.

    Held messages are made visible at once; running jobs may finish (up to
    ``shutdown_timeout``, then they are abandoned and their messages released
    too); receives still in flight are waited for and what they bring released.
    """

    def __init__(
        self,
        state: WorkerState,
        heartbeat: Heartbeat,
        receiver: Receiver,
        threads: cabc.Sequence[Joinable],
        shutdown_timeout: float | None,
    ) -> None:
        self._state = state
        self._heartbeat = heartbeat
        self._receiver = receiver
        self._threads = threads
        self._shutdown_timeout = shutdown_timeout

    def run(self) -> None:
        """Stop receiving, let running jobs end (or abandon them), release the rest."""
        state = self._state
        state.request_stop()
        released = self._release_held()
        abandoned = not self._wait_for_running_jobs()
        if abandoned:
            released += self._abandon_running_jobs()
        with state.lock:
            while state.long_polling or state.fetching:
                state.changed.wait()
        released += self._release_held()
        self._receiver.shutdown()
        if released:
            log.info("messages_released", count=released)
        with state.lock:
            state.changed.notify_all()
            state.work_ready.notify_all()
        if not abandoned:
            for threads in self._threads:
                threads.join()
        self._heartbeat.stop()

    def _wait_for_running_jobs(self) -> bool:
        """Wait for running jobs (up to the shutdown timeout); True if all finished."""
        timeout = self._shutdown_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        state = self._state
        with state.lock:
            while state.active:
                if deadline is None:
                    state.changed.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                state.changed.wait(remaining)
        return True

    def _abandon_running_jobs(self) -> int:
        """Past the shutdown deadline: abort running jobs and release their messages."""
        state = self._state
        with state.lock:
            # Only jobs whose handler still runs: a job that is settling its
            # message already decided what happens to it.
            deliveries = list(state.in_handler)
        log.warning(
            "shutdown_timeout_reached",
            timeout_seconds=self._shutdown_timeout,
            abandoned=len(deliveries),
        )
        for delivery in deliveries:
            self._heartbeat.abandon(delivery.lease, "shutdown_timeout")
        released = release_leases([d.lease for d in deliveries], even_failed=True)
        # Handlers that watch abort_requested get a moment to return, so their
        # job_finished (heartbeat_failed: the message is no longer theirs) is
        # logged before the process exits.
        deadline = time.monotonic() + ABORT_GRACE_SECONDS
        with state.lock:
            while state.active and (remaining := deadline - time.monotonic()) > 0:
                state.changed.wait(remaining)
        return released

    def _release_held(self) -> int:
        with self._state.lock:
            deliveries = self._state.drain_held()
        for delivery in deliveries:
            self._heartbeat.drop(delivery.lease)
        return release_leases([d.lease for d in deliveries])
