"""Receiving: one ReceiveMessage call on one queue, with its health bookkeeping.

Every message received is leased at once (the heartbeat keeps it invisible)
and becomes a :class:`Delivery`. A failed receive backs its queue off; the
first receive that gets through again makes the other queues on the same
endpoint retry at once.
"""

from __future__ import annotations

import collections.abc as cabc
import concurrent.futures
import contextvars
import time
import typing as t

import structlog

from ..model import call_hook
from ..model import Hooks
from ..model import MAX_BATCH_ENTRIES
from ..model import report_error
from ..sqs import SqsQueue
from ._delivery import Delivery
from ._delivery import identifiers
from ._heartbeat import Heartbeat
from ._receive_health import ReceiveHealth
from ._worker_state import WorkerState

log = structlog.get_logger(__name__)


def endpoint_of(queue: SqsQueue) -> str:
    """What identifies the server a queue is reached through.

    Queues on one endpoint share their fate when it is unreachable: the
    first receive that gets through brings the others' retries forward.
    """
    meta = getattr(queue.client, "meta", None)
    return str(getattr(meta, "endpoint_url", None) or id(queue.client))


class Receiver:
    """ReceiveMessage calls on the worker's queues, and each queue's health.

    Owned by :class:`~flask_sqs_jobs.engine.JobWorker` and called by its
    receiving strategy. It owns :attr:`health` and :attr:`long_polling`,
    both guarded by the worker state's lock (read them with it held). Every
    message it receives is leased at once (``Heartbeat.hold``) and becomes a
    :class:`Delivery`; a failed receive is logged, reported to the hooks
    (``receive_failed``, and ``worker_error`` with kind ``"receive"``) and
    backs its queue off.
    """

    def __init__(
        self,
        queues: cabc.Mapping[str, SqsQueue],
        heartbeat: Heartbeat,
        state: WorkerState,
        hooks: Hooks,
        threads: int,
    ) -> None:
        self.queues = dict(queues)
        #: Consecutive failures and backoff of each queue.
        self.health = ReceiveHealth({n: endpoint_of(q) for n, q in queues.items()})
        #: Queues with a long poll in flight.
        self.long_polling: set[str] = set()
        self._heartbeat = heartbeat
        self._state = state
        self._hooks = hooks
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="sqs-jobs-receive"
        )

    def prepare_all(self) -> None:
        """Read each queue's settings once; a failure counts as a receive failure."""
        for name, queue in self.queues.items():
            try:
                queue.prepare()
            except Exception as exc:
                self.record_failure(name, exc)

    def submit(self, fn: cabc.Callable[..., None], *args: t.Any) -> None:
        """Run ``fn(*args)`` on a receive thread, in a copy of this context."""
        self._pool.submit(contextvars.copy_context().run, fn, *args)

    def shutdown(self) -> None:
        """Let the receive threads end (the shutdown waited for their receives)."""
        self._pool.shutdown(wait=False)

    def receive(
        self, name: str, max_messages: int, wait_seconds: int
    ) -> list[Delivery]:
        """Receive up to ``max_messages`` from queue ``name``; [] on failure.

        Called without the state's lock (it takes it to record the outcome).
        """
        queue = self.queues[name]
        if queue.is_fifo:
            # One receive may return several messages of one group, and run in
            # parallel they would break the group's order. Taken one at a time,
            # SQS itself holds the group back until the message is deleted.
            max_messages = 1
        received_at = time.monotonic()
        try:
            queue.prepare()
            messages = queue.receive(max_messages, wait_seconds)
        except Exception as exc:
            self.record_failure(name, exc)
            return []
        deliveries = []
        for message in messages:
            receipt, message_id = identifiers(message)
            lease = self._heartbeat.hold(queue, name, receipt, message_id, received_at)
            deliveries.append(Delivery(name, queue, message, lease))
        self._record_success(name)
        if not deliveries:
            log.debug("receive_empty", queue=name, wait_seconds=wait_seconds)
        return deliveries

    def start_long_poll(
        self,
        name: str,
        max_messages: int,
        wait_seconds: int,
        found: cabc.Callable[[str], None] | None = None,
    ) -> None:
        """Long-poll queue ``name`` in the background (lock held).

        What it returns is held; the polling loop hears of it as news. When it
        brings messages, ``found(name)`` is called first (lock held): the
        strategy's own bookkeeping.
        """
        self.long_polling.add(name)
        self._state.receive_started()
        batch = max(1, min(MAX_BATCH_ENTRIES, max_messages))
        self.submit(self._long_poll, name, batch, wait_seconds, found)

    def _long_poll(
        self,
        name: str,
        max_messages: int,
        wait_seconds: int,
        found: cabc.Callable[[str], None] | None,
    ) -> None:
        """One long poll, on a receive thread; hold what it brings."""
        deliveries = self.receive(name, max_messages, wait_seconds)
        state = self._state
        with state.lock:
            self.long_polling.discard(name)
            if deliveries:
                if found is not None:
                    found(name)
                state.hold(name, deliveries)
            state.receive_ended()

    def _record_success(self, name: str) -> None:
        """A receive of ``name`` worked: forget its failures, retry its
        endpoint's unreachable queues now."""
        state = self._state
        with state.lock:
            health = self.health.queues[name]
            failures = health.record_success()
            brought: list[str] = []
            if self.health.any_unreachable():
                brought = self.health.bring_forward(health.endpoint)
                state.announce()
            state.received()
        if failures:
            log.info("receive_recovered", queue=name, failures=failures)
        for other in brought:
            log.info("receive_retry_brought_forward", queue=other)

    def record_failure(self, name: str, error: Exception) -> None:
        """Count a failed receive (or settings read) of ``name``; tell the hooks."""
        state = self._state
        with state.lock:
            health = self.health.queues[name]
            backoff = health.record_failure(error, time.monotonic())
            state.announce()
        log.warning(
            "receive_failed",
            queue=name,
            attempt=health.failures,
            retry_in_seconds=round(backoff, 2),
            error=health.last_error,
        )
        call_hook("receive_failed", self._hooks.receive_failed, name, error)
        report_error(self._hooks, name, error, "receive")
