"""Slots: the threads that run jobs, each job in two phases.

Phase one runs the handler inside the job's scope; then the slot is freed, so
the worker may receive for it while phase two settles the message (a delete
round trip) and reports the job's end; last the scope closes.
"""

from __future__ import annotations

import contextvars
import threading

import structlog

from ..model import close_thread_loop
from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._running import JobRunner
from ._settling import Settler
from ._worker_state import WorkerState

log = structlog.get_logger(__name__)

#: Threads per slot. A thread whose job is settling (a delete's round trip) no
#: longer holds its slot; at a high rate many jobs settle at once, and each
#: waits for its delete, so the slots need more threads than one each.
SETTLING_THREADS_PER_SLOT = 6


class JobProcessing:
    """Both phases of one job, as a slot thread runs them.

    Called by the slot threads (:class:`SlotThreads`, :class:`CycleThread`)
    without any lock held, each job in a context of its own. Phase one
    (:meth:`JobRunner.run`) holds the slot; it is freed as soon as the handler
    returned, then phase two (:meth:`Settler.settle`) settles the message
    while another job may already run in the slot; last the job's scope
    closes (:meth:`Ran.close`). It owns nothing: the runner, the settler and
    the state keep what they change.
    """

    def __init__(
        self,
        runner: JobRunner,
        settler: Settler,
        heartbeat: Heartbeat,
        state: WorkerState,
    ) -> None:
        self._runner = runner
        self._settler = settler
        self._heartbeat = heartbeat
        self._state = state

    def process(self, delivery: Delivery) -> None:
        """Run and settle ``delivery`` in a context of its own; never raises."""
        try:
            contextvars.copy_context().run(self._run_then_settle, delivery)
        except BaseException:
            log.exception("job_thread_error", message_id=delivery.message_id)
            self._state.free_slot(delivery)  # a no-op if phase one freed it

    def _run_then_settle(self, delivery: Delivery) -> None:
        """Phase one, free the slot, phase two, close the scope.

        A runner that raised (a bug: it never should) frees the slot and
        drops the lease, so the message comes back when its visibility ends.
        """
        try:
            ran = self._runner.run(delivery)
        except Exception:
            self._heartbeat.drop(delivery.lease)
            log.exception("message_processing_failed")
            self._state.free_slot(delivery)
            return
        try:
            self._state.free_slot(delivery)
            self._settler.settle(ran)
        finally:
            ran.close()


class SlotThreads:
    """Threads that take held messages while a slot is free (``concurrency > 1``).

    There are :data:`SETTLING_THREADS_PER_SLOT` threads per slot: a thread
    settling its job's message no longer holds a slot, and another thread
    fills it meanwhile. Started by the worker before its polling loop, joined
    by the shutdown; each thread waits in :meth:`WorkerState.next_job` and
    returns once a stop was requested.
    """

    def __init__(self, state: WorkerState, processing: JobProcessing) -> None:
        self._state = state
        self._processing = processing
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the threads, each in a copy of the caller's context."""
        context = contextvars.copy_context()
        for index in range(SETTLING_THREADS_PER_SLOT * self._state.concurrency):
            thread = threading.Thread(
                target=context.copy().run,
                args=(self._serve,),
                name=f"sqs-jobs-slot-{index}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def join(self) -> None:
        """Wait for the threads (after a stop request, they end on their own)."""
        for thread in self._threads:
            thread.join()

    def _serve(self) -> None:
        """One slot thread: take jobs until a stop; close its event loop."""
        try:
            while (delivery := self._state.next_job()) is not None:
                self._processing.process(delivery)
                self._state.job_done()
        finally:
            close_thread_loop()


class CycleThread:
    """The thread that runs each cycle's job with one slot (``concurrency=1``).

    The polling cycle hands its job over with the cycle's context and waits
    for it (:meth:`run`, called by the polling loop without the lock), so a
    ``poll`` middleware wraps the job, while a stop request can still give up
    on a job that outlives the shutdown timeout. The pending hand-over is this
    object's own, guarded by the state's lock.
    """

    def __init__(self, state: WorkerState, processing: JobProcessing) -> None:
        self._state = state
        self._processing = processing
        self._pending: tuple[Delivery, contextvars.Context] | None = None
        self._thread = threading.Thread(
            target=self._serve, name="sqs-jobs-slot-0", daemon=True
        )

    def start(self) -> None:
        """Start the thread (the worker, before its polling loop)."""
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread (the shutdown, after a stop request)."""
        self._thread.join()

    def run(self, delivery: Delivery) -> None:
        """Run ``delivery`` in this cycle; return once done (or a stop is asked)."""
        state = self._state
        with state.lock:
            state.start_job(delivery)
            self._pending = (delivery, contextvars.copy_context())
            state.hand_over()
            state.wait_for_cycle()

    def _serve(self) -> None:
        """The cycle thread: run each handed-over job in its cycle's context."""
        state = self._state
        try:
            while True:
                with state.lock:
                    while self._pending is None and not state.stop_requested:
                        state.wait_for_work()
                    if self._pending is None:
                        return
                    delivery, context = self._pending
                    self._pending = None
                context.run(self._processing.process, delivery)
                state.job_done(wake_loop=True)
        finally:
            close_thread_loop()
