"""Receiving with several slots: receives kept in flight for the free slots.

Queues with messages get short receives (several at once on a deep queue),
sized to the slots not yet promised to another receive, plus a prefetch: as
many messages as the slots will finish within one receive's round trip, so
the round trip is hidden without holding messages that would wait long (with
jobs slower than a round trip the prefetch is 0). A queue found empty is
long-polled in the background instead, so a job sent to it starts at once
even while other queues keep the worker busy. Slot threads take the held
messages themselves.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import math
import time

from ..model import MAX_BATCH_ENTRIES
from ._receiver import Receiver
from ._worker_state import WorkerState

#: Weight of the newest sample in the running averages of job and receive times.
_SMOOTHING = 0.1
#: The prefetch never exceeds this many messages per slot.
MAX_PREFETCH_PER_SLOT = 3
#: No prefetch while a slot frees less often than this (seconds): a held
#: message must start soon.
MAX_PREFETCH_WAIT = 0.5


def max_receives_in_flight(concurrency: int) -> int:
    """Short receives in flight at once for ``concurrency`` slots."""
    return max(1, min(8, concurrency // 2))


class PipelinedReceiving:
    """The receiving strategy of ``concurrency > 1``.

    Called by the polling loop (:meth:`wait_for_room`, then :meth:`cycle`
    inside the ``poll`` middleware) without the state's lock, and by the
    worker state with the lock held (:meth:`worth_a_receive`, on each freed
    slot). It keeps its own counters (short receives in flight per queue,
    the slots they may fill, the queues found empty, the running average of
    a receive's round trip), all guarded by the state's lock; the receives
    themselves run on the receiver's threads.

    :param receiver: makes the receives and owns the queues' health.
    :param state: the worker's shared state.
    :param polling_order: a weighted random order of the queues, per cycle.
    :param idle_wait_seconds: the long poll's wait for a queue found empty
        (0: no background long polls).
    """

    def __init__(
        self,
        receiver: Receiver,
        state: WorkerState,
        polling_order: cabc.Callable[[], list[str]],
        idle_wait_seconds: int,
    ) -> None:
        self._receiver = receiver
        self._state = state
        self._polling_order = polling_order
        self._idle_wait = idle_wait_seconds
        self._max_fetches = max_receives_in_flight(state.concurrency)
        self._receive_seconds: float | None = None
        # Short receives in flight per queue, and the messages they may bring.
        self._fetching: collections.Counter[str] = collections.Counter()
        self._reserved = 0
        # Queues whose last short receive came back empty: long-polled in the
        # background instead, until a long poll finds messages there.
        self._empty: set[str] = set()

    def cycle(self) -> None:
        """Start what receives there is room for; return on the first news."""
        state, receiver = self._state, self._receiver
        with state.lock:
            self._start_receives()
            events = state.events
            # Computed once, as a backed-off queue that is ready again drops
            # out of next_ready_in(), which would then wait for the next one.
            retry_in = receiver.health.next_ready_in()
            retry_at = None if retry_in is None else time.monotonic() + retry_in
            while not (state.stop_requested or state.events != events):
                if retry_at is None and not (self._fetching or receiver.long_polling):
                    break  # idle_wait 0 and every queue empty: the cycle ends
                timeout = None if retry_at is None else retry_at - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                state.wait_for_change(timeout)

    def wait_for_room(self) -> None:
        """Wait until a receive is worth starting, or a stop is requested."""
        state = self._state
        with state.lock:
            while not (state.stop_requested or self.worth_a_receive()):
                state.wait_for_change()

    def room(self) -> int:
        """Messages another receive may bring (lock held)."""
        state = self._state
        capacity = state.concurrency + self._prefetch()
        return capacity - state.running - state.held_count - self._reserved

    def worth_a_receive(self) -> bool:
        """Whether a receive should start now (lock held).

        At once for a free slot nothing is promised to; with a prefetch, only
        when it can bring a fair batch, as the held messages keep the slots busy.
        """
        return self.room() >= self._next_fetch_size()

    def _prefetch(self) -> int:
        """Messages to hold beyond the free slots: a batch, so receives come in
        batches, plus what the slots finish within a receive's round trip, so
        no slot waits for the next batch.

        None while a slot frees less often than every :data:`MAX_PREFETCH_WAIT`
        seconds: a message held for a slow job would wait too long.
        """
        job_seconds = self._state.job_seconds
        if job_seconds is None or self._receive_seconds is None:
            return 0
        slots = self._state.concurrency
        if job_seconds / slots > MAX_PREFETCH_WAIT:
            return 0
        most = MAX_PREFETCH_PER_SLOT * slots
        batch = min(MAX_BATCH_ENTRIES, slots)
        if job_seconds <= 0:
            return most
        # Twice what the slots finish in a round trip: receives vary.
        covering = math.ceil(2 * slots * self._receive_seconds / job_seconds)
        return min(most, batch + covering)

    def _start_receives(self) -> None:
        """Start a receive on each ready queue there is room for (lock held)."""
        state, receiver = self._state, self._receiver
        if state.stop_requested:
            return
        for name in receiver.health.ready_names(self._polling_order()):
            if name in receiver.long_polling:
                continue
            if name in self._empty and self._idle_wait:
                free = state.concurrency - state.running - state.held_count
                receiver.start_long_poll(
                    name, free, self._idle_wait, found=self._empty.discard
                )
                continue
            room = self.room()
            if (
                sum(self._fetching.values()) >= self._max_fetches
                or room < self._next_fetch_size()
            ):
                continue
            size = min(MAX_BATCH_ENTRIES, room)
            self._reserved += size
            self._fetching[name] += 1
            state.receive_started()
            receiver.submit(self._fetch, name, size)

    def _next_fetch_size(self) -> int:
        """The fewest messages worth another receive (lock held).

        With a prefetch, a fair batch. Without one (slow jobs, or none timed
        yet), one: a slot that no held message and no receive in flight is
        promised to would otherwise stay idle while jobs wait in the queue.
        """
        prefetch = self._prefetch()
        if prefetch:
            return min(MAX_BATCH_ENTRIES, prefetch)
        return 1

    def _fetch(self, name: str, size: int) -> None:
        """One short receive, on a receive thread."""
        started = time.monotonic()
        deliveries = self._receiver.receive(name, size, 0)
        elapsed = time.monotonic() - started
        state = self._state
        with state.lock:
            previous = self._receive_seconds
            self._receive_seconds = (
                elapsed
                if previous is None
                else previous + _SMOOTHING * (elapsed - previous)
            )
            self._reserved -= size
            self._fetching[name] -= 1
            if not self._fetching[name]:
                del self._fetching[name]
            if deliveries:
                state.hold(name, deliveries)
            elif self._idle_wait and self._receiver.health.ready(name):
                self._empty.add(name)
            state.receive_ended()
