"""JobWorker: the polling loop, its slots and its graceful stop.

The parts, each in its own module: receiving (``_receiver``, ``_receive_in_order``,
``_receive_pipelined``), slots (``_slots``), running a job (``_running``) and
settling it (``_settling``), sharing one :class:`~._worker_state.WorkerState`.
This module wires them together and owns the start-up and the shutdown.
"""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import time
import typing as t

import structlog

from ..flow import LimitStore
from ..flow import Tombstones
from ..model import as_job_handler
from ..model import call_hook
from ..model import check_worker_options
from ..model import compose_poll
from ..model import EXIT_OK
from ..model import EXIT_RECEIVE_FAILURES
from ..model import HandlerFunc
from ..model import Hooks
from ..model import IdempotencyKeys
from ..model import JobHandler
from ..model import MultiHooks
from ..model import SessionFactory
from ..sqs import NamedQueues
from ..sqs import warn_prefix_only
from ._heartbeat import Heartbeat
from ._idempotent_run import JobGuard
from ._receive_health import MAX_RECEIVE_FAILURES
from ._receive_in_order import InOrderReceiving
from ._receive_pipelined import max_receives_in_flight
from ._receive_pipelined import PipelinedReceiving
from ._receiver import Receiver
from ._shutdown import release_leases
from ._shutdown import Shutdown
from ._shutdown import worker_stop_event
from ._slots import CycleThread
from ._slots import JobProcessing
from ._slots import SlotThreads
from ._worker_state import WorkerState

log = structlog.get_logger(__name__)

#: With several slots, how long a job's delete may wait for others to share
#: its DeleteMessageBatch request. The slot is already free by then, so the
#: wait costs no throughput, only requests.
DELETE_LINGER_SECONDS = 0.01


class JobWorker:
    """Receive jobs from every queue of a :class:`QueueGroup` and run them.

    Each polling cycle draws a weighted random order of the queues and takes
    messages from the first one that has some, so higher weights are served
    first more often and no queue is starved. When every queue is empty the
    worker long-polls all of them at once for ``idle_wait_seconds``, so a job
    sent to any queue starts at once.

    With ``concurrency=1`` a cycle processes at most one message, inside the
    cycle (a ``poll`` middleware wraps its ``consume``), so ``should_stop``
    (checked before each cycle) counts cycles exactly. With ``concurrency=N``
    up to N jobs run at once in threads; the worker holds no more messages
    than its slots can start within about one receive's round trip.

    Delivery is at least once, so handlers must be idempotent.

    :param queues: the queues to poll.
    :param handlers: job type -> handler (a function taking the payload, or a
        :class:`~flask_sqs_jobs.engine.JobHandler`).
    :param should_stop: called before each polling cycle; returning True stops
        the worker gracefully.
    :param idle_wait_seconds: long-poll wait (0..20) when every queue is empty.
    :param concurrency: how many jobs may run at once.
    :param shutdown_timeout: after a stop request, how long running jobs may
        take; then their ``abort_requested`` is set, their messages are made
        visible again for another worker, and :meth:`run` returns. None (the
        default) waits for them.
    :param hooks: extra :class:`Hooks` (metrics, ...) called beside the
        group's own.
    :param idempotency_keys: a store's idempotency keys
        (``store.idempotency_keys()``); needed by idempotent handlers.
    :param session_factory: opens ``current_job.session`` (a SQL store's
        ``store.session``).
    :param cancellations: a store's cancellations (``store.cancellations()``):
        a cancelled job is deleted unrun, or asked to stop while it runs.
    :param limit_store: a store's limits (``store.limits()``); needed by
        handlers with ``limits=[...]``.
    """

    def __init__(
        self,
        queues: NamedQueues,
        handlers: cabc.Mapping[str, HandlerFunc | JobHandler],
        should_stop: cabc.Callable[[], bool] | None = None,
        idle_wait_seconds: int = 20,
        concurrency: int = 1,
        *,
        shutdown_timeout: float | None = None,
        hooks: cabc.Sequence[Hooks] = (),
        idempotency_keys: IdempotencyKeys | None = None,
        session_factory: SessionFactory | None = None,
        cancellations: Tombstones | None = None,
        limit_store: LimitStore | None = None,
    ) -> None:
        _check_arguments(queues, idle_wait_seconds, concurrency, shutdown_timeout)
        self._group = queues
        self._handlers = {name: as_job_handler(h) for name, h in handlers.items()}
        stores = (idempotency_keys, session_factory, limit_store)
        guard = JobGuard.for_handlers(self._handlers, *stores)
        self._should_stop = should_stop or (lambda: False)
        self._idle_wait = idle_wait_seconds
        self._concurrency = concurrency
        self._shutdown_timeout = shutdown_timeout
        self._names = list(queues.names)
        self._hooks = MultiHooks([queues.hooks, *hooks])
        self._heartbeat = Heartbeat()
        weights = {n: queues.weight(n) for n in self._names}
        self._state = state = WorkerState(self._names, weights, concurrency)
        #: Set once a stop was requested, for code that waits (middleware pauses).
        self.stop_event = state.stop_event
        processing = JobProcessing.build(
            self._handlers,
            queues.middleware,
            self._heartbeat,
            self._hooks,
            guard,
            delete_linger=DELETE_LINGER_SECONDS if concurrency > 1 else 0.0,
            between=state.free_slot,
            tombstones=cancellations,
        )
        #: What the worker counted: outcomes, malformed messages, unknown types.
        self.counts = processing.counts
        self._receiver = Receiver(
            dict(queues.items()),
            self._heartbeat,
            state,
            self._hooks,
            threads=len(self._names) + max_receives_in_flight(concurrency),
        )
        self._in_order: InOrderReceiving | None = None
        self._pipelined: PipelinedReceiving | None = None
        self._cycle_thread: CycleThread | None = None
        self._slot_threads: SlotThreads | None = None
        if concurrency > 1:
            self._pipelined = PipelinedReceiving(
                self._receiver, state, queues.polling_order, idle_wait_seconds
            )
            state.wake_loop_when(self._pipelined.worth_a_receive)
            self._slot_threads = SlotThreads(state, processing)
            self._poll = compose_poll(queues.middleware, self._pipelined.cycle)
        else:
            self._in_order = InOrderReceiving(
                self._receiver, state, queues.polling_order, idle_wait_seconds
            )
            self._cycle_thread = CycleThread(state, processing)
            self._poll = compose_poll(queues.middleware, self._cycle_in_order)
        self._shutdown = Shutdown(
            state,
            self._heartbeat,
            self._receiver,
            [t for t in (self._slot_threads, self._cycle_thread) if t is not None],
            shutdown_timeout,
            self._hooks,
        )

    # -- public API --

    @property
    def hooks(self) -> Hooks:
        """The hooks this worker reports to: its group's, then the extra ones."""
        return self._hooks

    def run(self) -> int:
        """Poll and process until stopped; return the exit status.

        Returns 0 after a stop (``should_stop``, :meth:`request_stop` or a
        signal), 1 when every queue failed to receive
        :data:`MAX_RECEIVE_FAILURES` times in a row.
        """
        return contextvars.copy_context().run(self._run)

    def request_stop(self) -> None:
        """Stop gracefully: receive nothing more, let running jobs finish.

        Safe to call from any thread (and from a signal handler when the
        worker runs in another thread).
        """
        if self._state.request_stop():
            log.info("worker_stopping", running=self._state.running)

    def release_all(self) -> int:
        """Make every message this worker holds visible again at once.

        For a forced stop: running jobs are abandoned, so their messages go
        back to the queue for another worker. Returns how many were released.
        """
        leases = self._heartbeat.held()
        for lease in leases:
            self._heartbeat.drop(lease)
        return release_leases(leases)

    @property
    def busy_slots(self) -> int:
        """How many jobs are running now."""
        return self._state.running

    @property
    def concurrency(self) -> int:
        """How many jobs may run at once (the slots)."""
        return self._concurrency

    @property
    def last_receive_age(self) -> float | None:
        """Seconds since a receive last completed (empty or not), or since the
        worker started if none has yet; None before :meth:`run`."""
        state = self._state
        at = state.last_receive_at or state.started_at
        return None if at is None else time.monotonic() - at

    def stats(self) -> dict[str, t.Any]:
        """``busy_slots``, ``last_receive_age`` (the properties) and ``outcomes``:
        jobs settled so far per outcome, every outcome listed (0 when none)."""
        return {
            "busy_slots": self.busy_slots,
            "last_receive_age": self.last_receive_age,
            "outcomes": self.counts.outcomes(),
        }

    def queue_failures(self) -> dict[str, int]:
        """Consecutive receive failures per queue (0 for a healthy queue)."""
        with self._state.lock:
            return self._receiver.health.failures()

    def queue_errors(self) -> dict[str, str]:
        """The last receive error of each queue that is failing now."""
        with self._state.lock:
            return self._receiver.health.errors()

    # -- the loop --

    def _run(self) -> int:
        """Start the parts, poll until stopped or broken, then shut down.

        The parts start in order (the heartbeat, the slot threads, the
        queues' settings) before ``worker_started``; the shutdown runs
        whatever ended the loop, before ``worker_stopped``.
        """
        worker_stop_event.set(self.stop_event)
        state = self._state
        state.mark_started()
        self._heartbeat.start()
        if self._slot_threads is not None:
            self._slot_threads.start()
        if self._cycle_thread is not None:
            self._cycle_thread.start()
        self._receiver.prepare_all()
        warn_prefix_only(self._receiver.queues)
        call_hook("worker_started", self._hooks.worker_started, list(self._names))
        log.info(
            "worker_started",
            queues=self._names,
            concurrency=self._concurrency,
            job_types=sorted(self._handlers),
        )
        status, reason = EXIT_OK, "stop_requested"
        try:
            while True:
                if state.stop_requested:
                    break
                if self._should_stop():
                    reason = "should_stop"
                    break
                if self._pipelined is not None:
                    self._pipelined.wait_for_room()
                if state.stop_requested:
                    break
                self._poll()
                if self._receiver.health.every_queue_broken():
                    status, reason = EXIT_RECEIVE_FAILURES, "receive_failures"
                    log.error(
                        "worker_giving_up",
                        reason="every queue failed to receive"
                        f" {MAX_RECEIVE_FAILURES} times in a row",
                        errors=self.queue_errors(),
                    )
                    break
        finally:
            self._shutdown.run()
        log.info("worker_stopped", reason=reason, exit_status=status)
        call_hook("worker_stopped", self._hooks.worker_stopped, reason)
        return status

    def _cycle_in_order(self) -> None:
        """One cycle with one slot: take at most one message and run it here,
        inside the ``poll`` middleware, which so wraps the job's run."""
        assert self._in_order is not None
        assert self._cycle_thread is not None
        delivery = self._in_order.next_message()
        if delivery is None:
            return
        with self._state.lock:
            if self._state.stop_requested:
                # Received after the stop request: released by the shutdown.
                self._state.hold(delivery.queue_name, [delivery])
                return
        self._cycle_thread.run(delivery)


def _check_arguments(
    queues: object,
    idle_wait_seconds: object,
    concurrency: object,
    shutdown_timeout: object,
) -> None:
    """Refuse a worker's arguments that are wrong, saying what to pass instead."""
    if not isinstance(queues, NamedQueues):
        raise TypeError(f"queues must be a QueueGroup; got {type(queues).__name__}")
    check_worker_options(idle_wait_seconds, concurrency, shutdown_timeout)
