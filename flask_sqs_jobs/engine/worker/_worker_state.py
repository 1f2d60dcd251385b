"""The state a worker's parts share, under one lock.

Receiving adds held messages; slot threads take them and free their slot when
the handler returns; the polling loop waits for a free slot or for news. Every
field is read and written with :attr:`WorkerState.lock` held.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import random
import threading
import time

import structlog

from ._delivery import Delivery
from ._receive_health import ReceiveHealth

log = structlog.get_logger(__name__)


class WorkerState:
    """Slots, held messages, receives in flight and the stop flag."""

    def __init__(
        self,
        names: cabc.Sequence[str],
        weights: cabc.Mapping[str, int],
        concurrency: int,
        health: ReceiveHealth,
    ) -> None:
        self.lock = threading.Lock()
        #: The polling loop waits here for a free slot or news from a receive.
        self.changed = threading.Condition(self.lock)
        #: Slot threads wait here for a held message and a free slot.
        self.work_ready = threading.Condition(self.lock)
        self.names = tuple(names)
        self.weights = dict(weights)
        self.concurrency = concurrency
        self.health = health
        self.stop_requested = False
        #: Set once a stop was requested, for code that waits (middleware pauses).
        self.stop_event = threading.Event()
        #: Slot threads inside a job (handler or settling); for the shutdown.
        self.active = 0
        #: Received messages waiting for a slot, per queue; each one is leased.
        self.held: dict[str, collections.deque[Delivery]] = {
            n: collections.deque() for n in names
        }
        self.held_count = 0
        #: Deliveries whose handler runs now, with when each started (for an
        #: abandoning shutdown, and the running average of job times).
        self.in_handler: dict[Delivery, float] = {}
        #: Running average of how long a handler takes, in seconds.
        self.job_seconds: float | None = None
        #: Whether a freed slot should wake the polling loop (set by the
        #: receiving strategy; waking it for every job costs a thread switch).
        self.slot_wakes_loop: cabc.Callable[[], bool] = lambda: True
        #: Queues with a long poll in flight.
        self.long_polling: set[str] = set()
        #: Queues whose last short receive came back empty (pipelined receiving
        #: long-polls them in the background instead).
        self.empty: set[str] = set()
        #: Short receives in flight per queue, and the slots they may fill.
        self.fetching: collections.Counter[str] = collections.Counter()
        self.reserved = 0
        #: Bumped on everything that may let the polling loop go on.
        self.events = 0
        self.last_receive_at: float | None = None
        self.started_at: float | None = None

    @property
    def running(self) -> int:
        """Jobs whose handler runs now (the busy slots)."""
        return len(self.in_handler)

    # -- stopping --

    def request_stop(self) -> bool:
        """Set the stop flag; return True the first time."""
        with self.lock:
            first = not self.stop_requested
            self.stop_requested = True
            self.stop_event.set()
            self.changed.notify_all()
            self.work_ready.notify_all()
        return first

    # -- held messages (call with the lock held) --

    def hold(self, name: str, deliveries: cabc.Iterable[Delivery]) -> None:
        held = self.held[name]
        before = self.held_count
        for delivery in deliveries:
            held.append(delivery)
            self.held_count += 1
        added = self.held_count - before
        if added:
            self.events += 1
            self.changed.notify_all()
            free = self.concurrency - self.running
            if free > 0:
                self.work_ready.notify(min(added, free))

    def take_held(self) -> Delivery | None:
        """Pop one held message in weighted order, skipping lost ones."""
        while self.held_count:
            names = [n for n in self.names if self.held[n]]
            if len(names) > 1:
                names.sort(key=lambda n: random.expovariate(self.weights[n]))
            delivery = self.held[names[0]].popleft()
            self.held_count -= 1
            if delivery.lease.failed:
                log.warning(
                    "held_message_lost",
                    queue=delivery.queue_name,
                    message_id=delivery.message_id,
                    reason=delivery.lease.failure,
                )
                continue
            return delivery
        return None

    def drain_held(self) -> list[Delivery]:
        deliveries = [d for held in self.held.values() for d in held]
        for held in self.held.values():
            held.clear()
        self.held_count = 0
        return deliveries

    # -- slots --

    def next_job(self) -> Delivery | None:
        """For a slot thread: wait for a held message and a free slot.

        Returns None once a stop was requested.
        """
        with self.lock:
            while True:
                if self.stop_requested:
                    return None
                if self.held_count and self.running < self.concurrency:
                    delivery = self.take_held()
                    if delivery is not None:
                        self.start_job(delivery)
                        return delivery
                    continue
                self.work_ready.wait()

    def start_job(self, delivery: Delivery) -> None:
        """Count ``delivery`` as running in a slot (call with the lock held)."""
        self.active += 1
        self.in_handler[delivery] = time.monotonic()

    def free_slot(self, delivery: Delivery) -> None:
        """The handler of ``delivery`` returned: its slot may take another job."""
        with self.lock:
            started = self.in_handler.pop(delivery, None)
            if started is None:
                return
            elapsed = time.monotonic() - started
            previous = self.job_seconds
            self.job_seconds = (
                elapsed if previous is None else previous + 0.1 * (elapsed - previous)
            )
            self.events += 1
            if self.held_count:
                self.work_ready.notify()
            if (
                self.stop_requested
                or self.running == self.concurrency - 1
                or self.slot_wakes_loop()
            ):
                self.changed.notify_all()

    def job_done(self) -> None:
        """A slot thread finished settling its job."""
        with self.lock:
            self.active -= 1
            if self.stop_requested:
                self.changed.notify_all()

    def wait_for_free_slot(self) -> None:
        with self.lock:
            while (
                self.running + self.held_count >= self.concurrency
                and not self.stop_requested
            ):
                self.changed.wait()

    # -- receives --

    def received(self) -> None:
        """A receive completed, empty or not (call with the lock held)."""
        self.last_receive_at = time.monotonic()
