"""What a worker's parts share: slots, held messages, the stop flag and news.

Receiving holds the messages it gets; slot threads take them and free their
slot when the handler returns; the polling loop waits for a free slot or for
news (anything that may let it go on); the shutdown drains what is held and
waits for what runs. Each of those changes :class:`WorkerState` only through
its methods, and the ``changed`` protocol (count the news, wake the loop)
lives in one place, :meth:`WorkerState.announce`.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import random
import threading
import time

import structlog

from ._delivery import Delivery

log = structlog.get_logger(__name__)

#: Weight of the newest job in the running average of job times.
_SMOOTHING = 0.1


class WorkerState:
    """Slots, held messages, receives in flight and the stop flag of one worker.

    Created and owned by :class:`~flask_sqs_jobs.engine.JobWorker`; every
    field changes here. :attr:`lock` guards all of them: methods documented
    as *lock held* must be called with it held (receiving keeps its own
    counters under the same lock, so one acquisition covers both), the others
    take it themselves and must be called without it.

    Who calls what: the receiving strategies and the receiver hold messages,
    announce news and wait for it; slot threads take jobs and free their
    slots; the one-slot cycle thread starts its cycle's job itself; the
    shutdown drains, waits and wakes every thread.

    :param names: the logical queues, in the group's order.
    :param weights: each queue's weight, for the order held messages are
        taken in.
    :param concurrency: the worker's slots.
    """

    def __init__(
        self,
        names: cabc.Sequence[str],
        weights: cabc.Mapping[str, int],
        concurrency: int,
    ) -> None:
        self.lock = threading.Lock()
        #: Set once a stop was requested, for code that waits (middleware pauses).
        self.stop_event = threading.Event()
        self.names = tuple(names)
        self.concurrency = concurrency
        self._weights = dict(weights)
        # The polling loop waits here for a free slot or news from a receive.
        self._changed = threading.Condition(self.lock)
        # Slot threads wait here for a held message and a free slot.
        self._work_ready = threading.Condition(self.lock)
        self._stop_requested = False
        # Slot threads inside a job (handler or settling), for the shutdown.
        self._active = 0
        # Received messages waiting for a slot, per queue; each one is leased.
        self._held: dict[str, collections.deque[Delivery]] = {
            n: collections.deque() for n in names
        }
        self._held_count = 0
        # Deliveries whose handler runs now, with when each started (for an
        # abandoning shutdown, and the running average of job times).
        self._in_handler: dict[Delivery, float] = {}
        self._job_seconds: float | None = None
        self._slot_wakes_loop: cabc.Callable[[], bool] = lambda: True
        self._receives = 0
        self._events = 0
        self._last_receive_at: float | None = None
        self._started_at: float | None = None

    # -- what the others read --

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was requested (read with or without the lock)."""
        return self._stop_requested

    @property
    def running(self) -> int:
        """Jobs whose handler runs now (the busy slots)."""
        return len(self._in_handler)

    @property
    def held_count(self) -> int:
        """Messages received and waiting for a slot."""
        return self._held_count

    @property
    def events(self) -> int:
        """How much news there was so far: a waiter compares it before and after."""
        return self._events

    @property
    def job_seconds(self) -> float | None:
        """Running average of how long a handler takes (None before the first)."""
        return self._job_seconds

    @property
    def last_receive_at(self) -> float | None:
        """When (monotonic) a receive last completed, empty or not."""
        return self._last_receive_at

    @property
    def started_at(self) -> float | None:
        """When (monotonic) the worker started polling; None before."""
        return self._started_at

    # -- the worker's life --

    def mark_started(self) -> None:
        """The polling loop starts (JobWorker, before the first cycle)."""
        self._started_at = time.monotonic()

    def wake_loop_when(self, predicate: cabc.Callable[[], bool]) -> None:
        """Wake the polling loop on a freed slot only while ``predicate()`` holds.

        Set once by the pipelined strategy at start-up (waking the loop for
        every job costs a thread switch); the predicate is called with the
        lock held.
        """
        self._slot_wakes_loop = predicate

    def request_stop(self) -> bool:
        """Set the stop flag and wake every waiter; return True the first time."""
        with self.lock:
            first = not self._stop_requested
            self._stop_requested = True
            self.stop_event.set()
            self._changed.notify_all()
            self._work_ready.notify_all()
        return first

    def wake_everyone(self) -> None:
        """Wake every thread waiting on this state (the shutdown's last step)."""
        with self.lock:
            self._changed.notify_all()
            self._work_ready.notify_all()

    # -- news (lock held) --

    def announce(self) -> None:
        """Count news and wake the polling loop (lock held)."""
        self._events += 1
        self._changed.notify_all()

    def wait_for_change(self, timeout: float | None = None) -> None:
        """Wait for news, a freed slot or a stop, at most ``timeout`` (lock held)."""
        self._changed.wait(timeout)

    def received(self) -> None:
        """A receive completed, empty or not (lock held)."""
        self._last_receive_at = time.monotonic()

    def receive_started(self) -> None:
        """A receive goes out; the shutdown waits for it (lock held)."""
        self._receives += 1

    def receive_ended(self) -> None:
        """A receive came back (after its messages were held): news (lock held)."""
        self._receives -= 1
        self.announce()

    # -- held messages --

    def hold(self, name: str, deliveries: cabc.Iterable[Delivery]) -> None:
        """Hold received messages of queue ``name`` for a slot (lock held)."""
        held = self._held[name]
        before = self._held_count
        for delivery in deliveries:
            held.append(delivery)
            self._held_count += 1
        added = self._held_count - before
        if added:
            self.announce()
            free = self.concurrency - self.running
            if free > 0:
                self._work_ready.notify(min(added, free))

    def take_held(self) -> Delivery | None:
        """Pop one held message in weighted order, skipping lost ones (lock held)."""
        while self._held_count:
            names = [n for n in self.names if self._held[n]]
            if len(names) > 1:
                names.sort(key=lambda n: random.expovariate(self._weights[n]))
            delivery = self._held[names[0]].popleft()
            self._held_count -= 1
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
        """Take every held message, for the shutdown to release."""
        with self.lock:
            deliveries = [d for held in self._held.values() for d in held]
            for held in self._held.values():
                held.clear()
            self._held_count = 0
        return deliveries

    # -- slots --

    def next_job(self) -> Delivery | None:
        """For a slot thread: wait for a held message and a free slot.

        Returns None once a stop was requested.
        """
        with self.lock:
            while True:
                if self._stop_requested:
                    return None
                if self._held_count and self.running < self.concurrency:
                    delivery = self.take_held()
                    if delivery is not None:
                        self.start_job(delivery)
                        return delivery
                    continue
                self._work_ready.wait()

    def start_job(self, delivery: Delivery) -> None:
        """Count ``delivery`` as running in a slot (lock held)."""
        self._active += 1
        self._in_handler[delivery] = time.monotonic()

    def hand_over(self) -> None:
        """Wake the one-slot cycle thread: its cycle's job is ready (lock held)."""
        self._work_ready.notify()

    def wait_for_work(self) -> None:
        """For the one-slot cycle thread: wait for a hand-over or a stop (lock held)."""
        self._work_ready.wait()

    def wait_for_cycle(self) -> None:
        """For the one-slot polling cycle: wait until its job is over (lock held).

        Returns early on a stop request, so the shutdown may give up on a job
        that outlives its timeout.
        """
        while self._active and not self._stop_requested:
            self._changed.wait()

    def free_slot(self, delivery: Delivery) -> None:
        """The handler of ``delivery`` returned: its slot may take another job."""
        with self.lock:
            started = self._in_handler.pop(delivery, None)
            if started is None:
                return
            elapsed = time.monotonic() - started
            previous = self._job_seconds
            self._job_seconds = (
                elapsed
                if previous is None
                else previous + _SMOOTHING * (elapsed - previous)
            )
            self._events += 1
            if self._held_count:
                self._work_ready.notify()
            if (
                self._stop_requested
                or self.running == self.concurrency - 1
                or self._slot_wakes_loop()
            ):
                self._changed.notify_all()

    def job_done(self, *, wake_loop: bool = False) -> None:
        """A slot thread finished settling its job.

        ``wake_loop`` wakes the polling loop even without a stop (the one-slot
        cycle waits for its job's end).
        """
        with self.lock:
            self._active -= 1
            if wake_loop or self._stop_requested:
                self._changed.notify_all()

    def wait_for_free_slot(self) -> None:
        """Wait until a slot is free and nothing is held for it, or a stop."""
        with self.lock:
            while (
                self.running + self._held_count >= self.concurrency
                and not self._stop_requested
            ):
                self._changed.wait()

    # -- the shutdown --

    def wait_for_jobs(self, deadline: float | None) -> bool:
        """Wait until no slot thread is inside a job; False once ``deadline`` passed.

        ``deadline`` is monotonic seconds, or None to wait for as long as it takes.
        """
        with self.lock:
            while self._active:
                if deadline is None:
                    self._changed.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def running_deliveries(self) -> list[Delivery]:
        """The deliveries whose handler still runs (not those settling)."""
        with self.lock:
            return list(self._in_handler)

    def wait_for_receives(self) -> None:
        """Wait until every receive in flight came back."""
        with self.lock:
            while self._receives:
                self._changed.wait()
