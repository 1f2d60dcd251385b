"""Visibility leases: keep every message the worker holds invisible to others.

The :class:`Heartbeat` extends each held message's visibility before it ends,
in batches, and watches two clocks per lease: the job's maximum runtime and
the 12 hours SQS grants a receive. A lease that fails aborts its job; the
settler then leaves the message alone.
"""

from __future__ import annotations

import collections.abc as cabc
import concurrent.futures
import threading
import time

import structlog

from ..model import JobRuntime
from ..sqs import is_lost_ownership
from ..sqs import SqsQueue
from ._lease import Lease as Lease
from ._lease import MAX_RUNTIME_EXCEEDED as MAX_RUNTIME_EXCEEDED
from ._lease import VISIBILITY_WINDOW_ENDED as VISIBILITY_WINDOW_ENDED
from ._lease_calls import extend_visibility
from ._lease_calls import seconds_until_next

log = structlog.get_logger(__name__)

#: Leases due within this fraction of their interval are extended together.
_BATCH_WINDOW = 0.25
#: Extension calls in flight at once: a slow or retried call (throttling,
#: latency) must not hold back the extensions of the other leases.
_CONCURRENT_CALLS = 4


class Heartbeat:
    """A thread that extends the visibility of every tracked lease.

    Extensions due at about the same time go out together, up to ten per
    ChangeMessageVisibilityBatch request.

    One per worker, created by :class:`~flask_sqs_jobs.engine.JobWorker`
    (the eager queue group has one too, never started, whose leases are
    never tracked). It owns every :class:`Lease` it created (:meth:`hold`):
    a lease's state changes only here, under this object's condition. Its
    callers: the receiver's threads (:meth:`hold`), each job's thread
    (:meth:`start_job`, :meth:`freeze`, :meth:`drop`), the shutdown and a
    forced exit (:meth:`abandon`, :meth:`held`, :meth:`stop`). None of them
    holds a lock of the worker when calling. SQS calls go out on a pool of
    :data:`_CONCURRENT_CALLS` threads, and renewals of what a job holds
    beside its message (:meth:`JobRuntime.renew`) on another, so that neither
    a slow call nor a slow store holds the others back; neither pool is ever
    called into with the condition held.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._leases: set[Lease] = set()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: When the thread wakes next on its own (monotonic seconds).
        self._wake_at = 0.0
        self._calls = concurrent.futures.ThreadPoolExecutor(
            _CONCURRENT_CALLS, thread_name_prefix="sqs-jobs-heartbeat-call"
        )
        self._renewals = concurrent.futures.ThreadPoolExecutor(
            _CONCURRENT_CALLS, thread_name_prefix="sqs-jobs-heartbeat-renew"
        )

    def start(self) -> None:
        """Start the heartbeat's thread (the worker, before it receives)."""
        self._thread = threading.Thread(
            target=self._run, name="sqs-jobs-heartbeat", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for the calls in flight (the shutdown's end)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._calls.shutdown(wait=True)
        self._renewals.shutdown(wait=True)

    def hold(
        self,
        queue: SqsQueue,
        queue_name: str,
        receipt_handle: str,
        message_id: str,
        received_at: float,
        *,
        window_from: float | None = None,
    ) -> Lease:
        """Start extending a received message's visibility (unless its timeout is 0).

        Called by the receiver for each message, right after ReceiveMessage
        answered; ``received_at`` was read before the call was sent, so the
        12-hour window is measured conservatively (from ``window_from`` when
        the message was received before it was handed over).
        """
        lease = Lease(
            queue,
            queue_name,
            receipt_handle,
            message_id,
            received_at,
            window_from=window_from,
        )
        if lease.visibility_timeout > 0:
            with self._cond:
                lease.tracked = True
                self._leases.add(lease)
                self._wake_if_before(lease.next_due - lease.interval * _BATCH_WINDOW)
        return lease

    def _wake_if_before(self, moment: float) -> None:
        """Wake the thread if it sleeps past ``moment`` (call with the lock).

        Waking it for every received message would cost a thread switch each.
        """
        if moment < self._wake_at:
            self._cond.notify_all()

    def start_job(
        self,
        lease: Lease,
        max_runtime_seconds: float,
        abort: threading.Event,
        runtime: JobRuntime | None = None,
    ) -> None:
        """A job starts under ``lease``: start its max-runtime clock.

        ``abort`` is set when the lease fails or is abandoned; ``runtime`` is
        renewed after each extension. An untracked lease (visibility timeout
        0) has no clock: only its abandonment sets ``abort``.
        """
        with self._cond:
            lease.abort = abort
            lease.runtime = runtime
            if lease.tracked:
                lease.job_deadline = time.monotonic() + max_runtime_seconds
                self._wake_if_before(lease.job_deadline)

    def drop(self, lease: Lease) -> None:
        """Stop extending ``lease``, waiting for an extension already in flight.

        After this returns no heartbeat call for the message is pending, so the
        caller may set its visibility (or delete it) without being overwritten.
        """
        with self._cond:
            lease.tracked = False
            self._leases.discard(lease)
            while lease.in_flight:
                self._cond.wait()

    def freeze(self, lease: Lease) -> None:
        """Wait for an extension in flight, then keep extending until :meth:`drop`.

        For a job whose message is about to be deleted: once this returns,
        ``lease.failed`` is final, and the message stays invisible however long
        the delete takes (batching, latency, retries). An extension failing
        after that decision no longer changes it.
        """
        with self._cond:
            while lease.in_flight:
                self._cond.wait()
            lease.settling = True
            lease.job_deadline = None

    def abandon(self, lease: Lease, reason: str) -> None:
        """Give up ``lease`` for good: its job may no longer delete the message.

        Like :meth:`drop`, waits for an extension already in flight, so the
        caller may then make the message visible again.
        """
        with self._cond:
            if lease.failure is None:
                lease.failure = reason
            if lease.abort is not None:
                lease.abort.set()
            lease.tracked = False
            self._leases.discard(lease)
            while lease.in_flight:
                self._cond.wait()

    def held(self) -> list[Lease]:
        """The leases tracked now (for a forced exit, which releases them all)."""
        with self._cond:
            return list(self._leases)

    # -- the thread --

    def _run(self) -> None:
        """The thread: sleep until a lease is due, then hand it to a call."""
        while True:
            with self._cond:
                due = self._take_due()
                while not due and not self._stopping:
                    timeout = self._seconds_until_next()
                    self._wake_at = (
                        float("inf") if timeout is None else time.monotonic() + timeout
                    )
                    self._cond.wait(timeout)
                    self._wake_at = 0.0
                    due = self._take_due()
                if self._stopping:
                    for lease in due:
                        lease.in_flight = False
                    self._cond.notify_all()
                    return
            self._calls.submit(self._extend_due, due)

    def _extend_due(self, due: list[Lease]) -> None:
        """Extend ``due`` (on the call pool), then record each result.

        A success moves the lease's next extension on and queues the job's
        renewal; a failure fails the lease, unless the job already settled it.
        """
        try:
            results = extend_visibility(due)
        except Exception as exc:
            failed = (type(exc).__name__, str(exc))
            results = {lease: (time.monotonic(), failed) for lease in due}
        renewals = []
        with self._cond:
            for lease, (sent_at, error) in results.items():
                lease.in_flight = False
                if error is None:
                    if lease.tracked:
                        lease.next_due = sent_at + lease.interval
                        runtime = lease.runtime
                        if runtime is not None and runtime.renews:
                            granted = lease.cap_visibility(lease.visibility_timeout)
                            renewals.append((runtime.renew, granted))
                elif not (lease.failed or lease.settling):
                    # Even when its job ended (dropped) while the call was
                    # in flight: that job must not delete the message now.
                    self._fail(
                        lease, f"{error[0]}: {error[1]}", lost=is_lost_ownership(error)
                    )
            self._cond.notify_all()
        for renew, seconds in renewals:
            self._renew_later(renew, seconds)

    def _renew_later(self, renew: cabc.Callable[[int], None], seconds: int) -> None:
        """Run ``renew`` on a pool of its own: a slow store delays no extension."""
        try:
            self._renewals.submit(renew, seconds)
        except RuntimeError:  # the pool is shut down: the worker is stopping
            log.warning("lease_renewal_skipped", reason="worker stopping")

    def _take_due(self) -> list[Lease]:
        """The leases to extend now, marked in flight (call with the condition).

        On the way, fails the leases whose job ran out of time or whose 12
        hours are over.
        """
        now = time.monotonic()
        due = []
        for lease in list(self._leases):
            if lease.job_deadline is not None and now >= lease.job_deadline:
                self._fail(lease, MAX_RUNTIME_EXCEEDED, lost=False)
            elif lease.window_closes_at - now <= 1:
                # SQS grants no more: the last extension ends about now.
                if lease.settling:
                    lease.tracked = False
                    self._leases.discard(lease)
                else:
                    self._fail(lease, VISIBILITY_WINDOW_ENDED, lost=False)
            elif (
                not lease.in_flight
                and lease.next_due - now <= lease.interval * _BATCH_WINDOW
            ):
                lease.in_flight = True
                due.append(lease)
        return due

    def _seconds_until_next(self) -> float | None:
        """How long the thread may sleep (call with the condition); None: no lease."""
        return seconds_until_next(self._leases, _BATCH_WINDOW)

    def _fail(self, lease: Lease, failure: str, *, lost: bool) -> None:
        """Give up ``lease`` for ``failure`` and abort its job (call with the
        condition); ``lost`` says SQS answered that the receipt no longer owns
        the message."""
        lease.failure = failure
        lease.tracked = False
        self._leases.discard(lease)
        if lease.abort is not None:
            lease.abort.set()
        log.warning(
            "heartbeat_failed"
            if failure != MAX_RUNTIME_EXCEEDED
            else "max_runtime_exceeded",
            queue=lease.queue_name,
            message_id=lease.message_id,
            reason=failure,
            ownership_lost=lost,
        )
