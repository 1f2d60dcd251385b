"""Receiving with one slot: each cycle takes at most one message, in order.

A cycle tries the queues in weighted random order with short receives and
returns the first message found, which the worker then runs inside the same
cycle (so a ``poll`` middleware wraps it). When every queue is empty it
long-polls all of them at once and returns on the first news, so a message on
any queue starts at once.
"""

from __future__ import annotations

import collections.abc as cabc
import time

from ._delivery import Delivery
from ._receiver import Receiver
from ._worker_state import WorkerState


class InOrderReceiving:
    """The receiving strategy of ``concurrency=1``.

    Called by the polling loop only (:meth:`next_message`, once per cycle,
    inside the ``poll`` middleware), never with the state's lock held; it
    takes the lock for its reads of the state and the receiver. Its only own
    state, whether the last cycle found every queue empty, is the loop's.

    :param receiver: makes the receives and owns the queues' health.
    :param state: the worker's shared state.
    :param polling_order: a weighted random order of the queues, per cycle.
    :param idle_wait_seconds: how long to long-poll every queue once all
        were found empty (0: never).
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
        self._idle = False

    def next_message(self) -> Delivery | None:
        """Return the cycle's message, or None when the cycle found none.

        Messages a receive brought beyond the first are held for the next
        cycles.
        """
        state, receiver = self._state, self._receiver
        with state.lock:
            if state.stop_requested:
                return None
            held = state.take_held()
            if held is not None:
                self._idle = False
                return held
            long_polling = set(receiver.long_polling)
            ready = receiver.health.ready_names(self._polling_order())
        if not (self._idle and self._idle_wait):
            for name in ready:
                if name in long_polling:
                    continue
                deliveries = receiver.receive(name, 1, 0)
                if deliveries:
                    self._idle = False
                    with state.lock:
                        state.hold(name, deliveries[1:])
                    return deliveries[0]
        if self._idle_wait:
            self._idle = True
            return self._long_poll_all()
        if not ready:
            self._sleep_until_a_queue_is_ready()
        return None

    def _long_poll_all(self) -> Delivery | None:
        """Long-poll every ready queue at once; return on the first news."""
        state, receiver = self._state, self._receiver
        with state.lock:
            # A queue whose receive just failed waits for its backoff.
            for name in receiver.health.ready_names(state.names):
                if name not in receiver.long_polling and not state.stop_requested:
                    receiver.start_long_poll(name, 1, self._idle_wait)
            events = state.events
            # Computed once: a backed-off queue that is ready again drops out of
            # next_ready_in(), so asking in the loop would never reach 0 and the
            # queue would wait for the other long polls to end.
            retry_in = receiver.health.next_ready_in()
            retry_at = None if retry_in is None else time.monotonic() + retry_in
            while not (state.stop_requested or state.events != events):
                if state.held_count:
                    break
                if retry_at is None and not receiver.long_polling:
                    break
                timeout = None if retry_at is None else retry_at - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                state.wait_for_change(timeout)
            if state.stop_requested:
                return None
            held = state.take_held()
        if held is not None:
            self._idle = False
        return held

    def _sleep_until_a_queue_is_ready(self) -> None:
        """Every queue is backed off: wait for the first to be ready (or news)."""
        state = self._state
        with state.lock:
            timeout = self._receiver.health.next_ready_in()
            if timeout is not None and not state.stop_requested:
                state.wait_for_change(timeout)
