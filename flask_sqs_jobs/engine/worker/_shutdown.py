"""A worker's shutdown: release held messages, wait for (or abandon) running jobs.

Releasing a message makes it visible again at once (visibility 0), in
batches; in this package *release* means only that (an idempotency key is
*relinquished*).
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import contextvars
import threading
import time
import typing as t

import structlog

from ..model import Hooks
from ..model import MAX_BATCH_ENTRIES
from ..model import report_error
from ..sqs import CallFailed
from ..sqs import SqsQueue
from ._heartbeat import Heartbeat
from ._heartbeat import Lease
from ._receiver import Receiver
from ._worker_state import WorkerState

log = structlog.get_logger("flask_sqs_jobs.engine.worker._worker")

#: The stop event of the worker whose polling loop runs in this context.
worker_stop_event: contextvars.ContextVar[threading.Event] = contextvars.ContextVar(
    "flask_sqs_jobs.worker_stop_event"
)


def pause(seconds: float) -> bool:
    """Sleep up to ``seconds``, waking at once if the running worker is asked to stop.

    For ``poll`` middleware that holds a worker back (e.g. while a deploy
    drains): it returns True when a stop was requested. Outside a worker's
    polling loop it simply sleeps.
    """
    event = worker_stop_event.get(None)
    if event is None:
        time.sleep(seconds)
        return False
    return event.wait(seconds)


#: After the shutdown deadline, how long aborted handlers may take to return.
ABORT_GRACE_SECONDS = 2.0


class Joinable(t.Protocol):
    """Threads the shutdown waits for (the slot threads)."""

    def join(self) -> None:
        """Return once the threads ended."""


class Shutdown:
    """The end of a worker's run, in order.

    Held messages are made visible at once; running jobs may finish (up to
    ``shutdown_timeout``, then they are abandoned and their messages released
    too); receives still in flight are waited for and what they bring released.

    Run once by the polling loop's thread when the loop ends (:meth:`run`),
    without any lock held. It owns nothing: it asks the state, the heartbeat
    and the receiver to stop, and reports failed releases to the hooks
    (``worker_error``, kind ``"settle"``).
    """

    def __init__(
        self,
        state: WorkerState,
        heartbeat: Heartbeat,
        receiver: Receiver,
        threads: cabc.Sequence[Joinable],
        shutdown_timeout: float | None,
        hooks: Hooks,
    ) -> None:
        self._state = state
        self._heartbeat = heartbeat
        self._receiver = receiver
        self._threads = threads
        self._shutdown_timeout = shutdown_timeout
        self._hooks = hooks

    def run(self) -> None:
        """Stop receiving, let running jobs end (or abandon them), release the rest."""
        state = self._state
        state.request_stop()
        released = self._release_held()
        timeout = self._shutdown_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        abandoned = not state.wait_for_jobs(deadline)
        if abandoned:
            released += self._abandon_running_jobs()
        state.wait_for_receives()
        released += self._release_held()
        self._receiver.shutdown()
        if released:
            log.info("messages_released", count=released)
        state.wake_everyone()
        if not abandoned:
            for threads in self._threads:
                threads.join()
        self._heartbeat.stop()

    def _abandon_running_jobs(self) -> int:
        """Past the shutdown deadline: abort running jobs and release their messages."""
        # Only jobs whose handler still runs: a job that is settling its
        # message already decided what happens to it.
        deliveries = self._state.running_deliveries()
        log.warning(
            "shutdown_timeout_reached",
            timeout_seconds=self._shutdown_timeout,
            abandoned=len(deliveries),
        )
        for delivery in deliveries:
            self._heartbeat.abandon(delivery.lease, "shutdown_timeout")
        released = self._release([d.lease for d in deliveries], even_failed=True)
        # Handlers that watch abort_requested get a moment to return, so their
        # job_finished (heartbeat_failed: the message is no longer theirs) is
        # logged before the process exits.
        self._state.wait_for_jobs(time.monotonic() + ABORT_GRACE_SECONDS)
        return released

    def _release_held(self) -> int:
        """Release every message held for a slot; return how many were."""
        deliveries = self._state.drain_held()
        for delivery in deliveries:
            self._heartbeat.drop(delivery.lease)
        return self._release([d.lease for d in deliveries])

    def _release(self, leases: list[Lease], *, even_failed: bool = False) -> int:
        """Release ``leases``' messages, reporting each failure as a settle error."""

        def failed(queue: str, error: BaseException) -> None:
            report_error(self._hooks, queue, error, "settle")

        return release_leases(leases, even_failed=even_failed, on_error=failed)


def release_leases(
    leases: cabc.Sequence[Lease],
    *,
    even_failed: bool = False,
    on_error: cabc.Callable[[str, BaseException], None] | None = None,
) -> int:
    """Set the visibility of each lease's message to 0, in batches per queue.

    Failed leases are skipped (the message may be someone else's by now)
    unless ``even_failed``: a lease this worker abandoned itself is still its own.
    Each failed release is logged, and handed to ``on_error`` with its
    logical queue's name. Returns how many messages were released.
    """
    by_queue: dict[SqsQueue, list[Lease]] = collections.defaultdict(list)
    for lease in leases:
        if even_failed or not lease.failed:
            by_queue[lease.queue].append(lease)
    released = 0
    for queue, queued in by_queue.items():
        for start in range(0, len(queued), MAX_BATCH_ENTRIES):
            chunk = queued[start : start + MAX_BATCH_ENTRIES]
            errors = queue.change_visibility_many(
                [(x.receipt_handle, 0) for x in chunk]
            )
            for lease, error in zip(chunk, errors, strict=True):
                if error is None:
                    released += 1
                    continue
                log.warning(
                    "release_failed",
                    sqs_queue=queue.name,
                    error=f"{error[0]}: {error[1]}",
                )
                if on_error is not None:
                    on_error(
                        lease.queue_name, CallFailed("ChangeMessageVisibility", error)
                    )
    return released
