"""Slots: the threads that run jobs; and one delivery processed, in two phases.

:class:`JobProcessing` is the one way a received message is processed and
settled: the worker's slot threads, the eager sink and the AWS Lambda handler
all call it. Phase one runs the handler inside the job's scope; then the
caller's ``between`` runs (the worker frees the slot, so it may receive for it
while phase two settles the message and reports the job's end); last the
scope closes.
"""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import dataclasses
import threading

import structlog

from ..flow import Tombstones
from ..model import close_thread_loop
from ..model import Hooks
from ..model import JobHandler
from ..model import JobMiddleware
from ..model import Outcome
from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._idempotent_run import JobGuard
from ._running import JobRunner
from ._settling import Settler
from ._worker_state import WorkerState

log = structlog.get_logger(__name__)

#: Threads beyond one per slot. A thread whose job is settling (a delete's
#: round trip) no longer holds its slot, and another thread fills the slot
#: meanwhile. The settles of many jobs share one batch call (group commit), so
#: a few threads keep the slots busy at any concurrency; a thread each more
#: only adds contention for the interpreter lock.
SETTLING_THREADS = 16
#: At most this many threads per slot (a worker of 2 slots gets 2 x 6, not 2 + 16).
MAX_THREADS_PER_SLOT = 6


def slot_thread_count(concurrency: int) -> int:
    """The slot threads of a worker of ``concurrency`` slots."""
    return min(concurrency * MAX_THREADS_PER_SLOT, concurrency + SETTLING_THREADS)


@dataclasses.dataclass(frozen=True, slots=True)
class Processed:
    """What came of processing one delivery, for the caller that asked."""

    #: The job's outcome; None for a message that is not a runnable job
    #: (malformed, unknown job type, unread payload) or a processing error.
    outcome: Outcome | None = None
    #: What the handler raised (or what kept it from running).
    exception: BaseException | None = None


def _nothing(delivery: Delivery) -> None:
    """The default ``between``: nothing to do between the two phases."""


class JobProcessing:
    """Both phases of one delivery: run its handler, then settle its message.

    Called without any lock held, each delivery in a context of its own, by
    the worker's slot threads (:class:`SlotThreads`, :class:`CycleThread`),
    by the eager sink and by the AWS Lambda handler. Phase one
    (:meth:`JobRunner.run`) runs the handler; then ``between(delivery)``
    runs (the worker frees the job's slot there, so another job may start
    while this one settles); phase two (:meth:`Settler.settle`) settles the
    message; last the job's scope closes (:meth:`Ran.close`). It owns
    nothing: the runner, the settler and the caller keep what they change.

    :param between: called with the delivery once phase one is over (also
        when processing failed), before the settle phase.
    """

    def __init__(
        self,
        runner: JobRunner,
        settler: Settler,
        heartbeat: Heartbeat,
        *,
        between: cabc.Callable[[Delivery], None] = _nothing,
    ) -> None:
        self._runner = runner
        self._settler = settler
        self._heartbeat = heartbeat
        self._between = between
        #: What was counted: outcomes, malformed messages, unknown job types.
        self.counts = runner.counts

    @classmethod
    def build(
        cls,
        handlers: cabc.Mapping[str, JobHandler],
        middleware: cabc.Sequence[JobMiddleware],
        heartbeat: Heartbeat,
        hooks: Hooks,
        guard: JobGuard,
        *,
        delete_linger: float = 0.0,
        between: cabc.Callable[[Delivery], None] = _nothing,
        tombstones: Tombstones | None = None,
    ) -> JobProcessing:
        """The runner and settler for ``handlers``, sharing one count
        (``tombstones``: the store's cancellations, checked by the runner)."""
        runner = JobRunner(handlers, middleware, heartbeat, hooks, guard, tombstones)
        settler = Settler(
            heartbeat,
            hooks,
            lambda: sorted(handlers),
            delete_linger=delete_linger,
            counts=runner.counts,
        )
        return cls(runner, settler, heartbeat, between=between)

    def process(
        self, delivery: Delivery, context: contextvars.Context | None = None
    ) -> Processed:
        """Run and settle ``delivery``; never raises ``Exception``.

        What a handler raises beyond ``Exception`` (``SystemExit``,
        ``KeyboardInterrupt``) goes on up, once ``between`` ran: the slot
        threads log it and go on, the eager sink and the Lambda handler let
        it reach their caller.

        :param context: where to run it (a copy of the caller's by default).
        """
        context = contextvars.copy_context() if context is None else context
        try:
            return context.run(self._run_then_settle, delivery)
        except Exception:
            log.exception("job_thread_error", message_id=delivery.message_id)
            self._between(delivery)  # the worker's free_slot: a no-op if done
            return Processed()
        except BaseException:
            self._between(delivery)
            raise

    def _run_then_settle(self, delivery: Delivery) -> Processed:
        """Phase one, ``between``, phase two, close the scope.

        A runner that raised (a bug: it never should) drops the lease, so the
        message comes back when its visibility ends.
        """
        try:
            ran = self._runner.run(delivery)
        except Exception:
            self._heartbeat.drop(delivery.lease)
            log.exception("message_processing_failed")
            self._between(delivery)
            return Processed()
        try:
            self._between(delivery)
            outcome = self._settler.settle(ran)
        finally:
            ran.close()
        return Processed(outcome, ran.exception)


def _process_in_slot(processing: JobProcessing, delivery: Delivery) -> None:
    """Process ``delivery`` on a slot thread, which must outlive any job."""
    try:
        processing.process(delivery)
    except BaseException:
        log.exception("job_thread_error", message_id=delivery.message_id)


class SlotThreads:
    """Threads that take held messages while a slot is free (``concurrency > 1``).

    There are :func:`slot_thread_count` threads: one per slot plus
    :data:`SETTLING_THREADS`, as a thread settling its job's message no
    longer holds a slot, and another thread fills it meanwhile. Started by
    the worker before its polling loop, joined by the shutdown; each thread
    waits in :meth:`WorkerState.next_job` and returns once a stop was
    requested.
    """

    def __init__(self, state: WorkerState, processing: JobProcessing) -> None:
        self._state = state
        self._processing = processing
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the threads, each in a copy of the caller's context."""
        context = contextvars.copy_context()
        for index in range(slot_thread_count(self._state.concurrency)):
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
                _process_in_slot(self._processing, delivery)
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
                context.run(_process_in_slot, self._processing, delivery)
                state.job_done(wake_loop=True)
        finally:
            close_thread_loop()
