"""JobWorker: the polling loop, its job threads and its graceful stop."""

from __future__ import annotations

import collections
import collections.abc as cabc
import concurrent.futures
import contextvars
import functools
import random
import threading
import time
import typing as t

import botocore.exceptions
import structlog

from ._handlers import as_job_handler
from ._handlers import close_thread_loop
from ._handlers import HandlerFunc
from ._handlers import JobHandler
from ._heartbeat import Heartbeat
from ._heartbeat import Lease
from ._hooks import Hooks
from ._hooks import MultiHooks
from ._middleware import compose_poll
from ._processor import Delivery
from ._processor import Processor
from ._queue import SqsQueue
from ._queue_group import QueueGroup
from ._wire import MAX_BATCH_ENTRIES
from ._wire import MAX_WAIT_SECONDS

log = structlog.get_logger(__name__)

#: Consecutive receive failures after which a queue counts as broken; when
#: every queue is broken the worker gives up (exit status 1).
MAX_RECEIVE_FAILURES = 10
#: Cap of the receive-failure backoff, in seconds.
MAX_RECEIVE_BACKOFF = 30.0

#: After the shutdown deadline, how long aborted handlers may take to return.
ABORT_GRACE_SECONDS = 2.0

EXIT_OK = 0
EXIT_RECEIVE_FAILURES = 1

_stop_event: contextvars.ContextVar[threading.Event] = contextvars.ContextVar(
    "flask_sqs_jobs.worker_stop_event"
)


def pause(seconds: float) -> bool:
    """Sleep up to ``seconds``, waking at once if the running worker is asked to stop.

    For ``poll`` middleware that holds a worker back (e.g. while a deploy
    drains): it returns True when a stop was requested. Outside a worker's
    polling loop it simply sleeps.
    """
    event = _stop_event.get(None)
    if event is None:
        time.sleep(seconds)
        return False
    return event.wait(seconds)


def _unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the endpoint could not be reached at all."""
    connection_errors = (
        botocore.exceptions.ConnectionError,
        botocore.exceptions.HTTPClientError,
    )
    return isinstance(error, connection_errors)


def _endpoint_of(queue: SqsQueue) -> str:
    """What identifies the server a queue is reached through."""
    meta = getattr(queue.client, "meta", None)
    return str(getattr(meta, "endpoint_url", None) or id(queue.client))


class _QueueHealth:
    """Receive failures of one queue and when it may be polled again."""

    __slots__ = ("endpoint", "failures", "last_error", "retry_at", "unreachable")

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.retry_at = 0.0
        self.last_error: str | None = None
        #: The last failure was a connection error, not an answer from SQS.
        self.unreachable = False

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def record_failure(self, error: BaseException, now: float) -> float:
        """Count a failure and return the (jittered, exponential) backoff."""
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"
        self.unreachable = _unreachable(error)
        ceiling = min(MAX_RECEIVE_BACKOFF, 2.0 ** (self.failures - 1))
        backoff = random.uniform(ceiling / 2, ceiling)
        self.retry_at = now + backoff
        return backoff


class JobWorker:
    """Receive jobs from every queue of a :class:`QueueGroup` and run them.

    Each polling cycle draws a weighted random order of the queues and takes
    messages from the first one that has some, so higher weights are served
    first more often and no queue is starved. When every queue is empty the
    worker long-polls all of them at once for ``idle_wait_seconds``, so a job
    sent to any queue starts at once.

    With ``concurrency=1`` a cycle processes at most one message, so
    ``should_stop`` (checked before each cycle) counts cycles exactly. With
    ``concurrency=N`` up to N jobs run at once in threads, and the worker
    never asks SQS for more messages than it has free slots.

    Delivery is at least once, so handlers must be idempotent.

    :param queues: the queues to poll.
    :param handlers: job type -> handler (a function taking the payload, or a
        :class:`~flask_sqs_jobs.engine._handlers.JobHandler`).
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
    """

    def __init__(
        self,
        queues: QueueGroup,
        handlers: cabc.Mapping[str, HandlerFunc | JobHandler],
        should_stop: cabc.Callable[[], bool] | None = None,
        idle_wait_seconds: int = 20,
        concurrency: int = 1,
        *,
        shutdown_timeout: float | None = None,
        hooks: cabc.Sequence[Hooks] = (),
    ) -> None:
        if not isinstance(queues, QueueGroup):
            raise TypeError(f"queues must be a QueueGroup; got {type(queues).__name__}")
        if (
            isinstance(idle_wait_seconds, bool)
            or not isinstance(idle_wait_seconds, int)
            or not 0 <= idle_wait_seconds <= MAX_WAIT_SECONDS
        ):
            raise ValueError(
                f"idle_wait_seconds must be an int 0..{MAX_WAIT_SECONDS} (the SQS"
                " long-poll"
                f" maximum); got {idle_wait_seconds!r}"
            )
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or concurrency < 1
        ):
            raise ValueError(f"concurrency must be an int >= 1; got {concurrency!r}")
        if shutdown_timeout is not None and (
            isinstance(shutdown_timeout, bool)
            or not isinstance(shutdown_timeout, int | float)
            or shutdown_timeout < 0
        ):
            raise ValueError(
                "shutdown_timeout must be a number of seconds >= 0, or None to wait"
                f" for running jobs; got {shutdown_timeout!r}"
            )
        self._group = queues
        self._handlers = {name: as_job_handler(h) for name, h in handlers.items()}
        self._should_stop = should_stop or (lambda: False)
        self._idle_wait = idle_wait_seconds
        self._concurrency = concurrency
        self._shutdown_timeout = shutdown_timeout
        self._names = list(queues.names)
        self._hooks = MultiHooks([queues.hooks, *hooks]) if hooks else queues.hooks

        # One lock; the dispatcher waits on _cond, job threads on _work_ready,
        # so freeing a slot wakes one thread, not all of them.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._work_ready = threading.Condition(self._lock)
        self._stop_requested = False
        #: Set once a stop was requested, for code that waits (middleware pauses).
        self.stop_event = threading.Event()
        self._running = 0
        self._active: set[Delivery] = set()
        self._slotted: set[Delivery] = set()
        self._held: dict[str, collections.deque[Delivery]] = {
            n: collections.deque() for n in self._names
        }
        self._polling: set[str] = set()
        self._poll_completions = 0
        #: Pipelined receiving (concurrency > 1): short receives in flight per
        #: queue, slots they may fill, queues last found empty, and a counter
        #: of everything that may let the dispatcher go on.
        self._fetching: collections.Counter[str] = collections.Counter()
        self._reserved = 0
        self._empty: set[str] = set()
        self._events = 0
        self._max_fetches = max(1, min(4, concurrency // 4))
        self._idle = False
        self._health = {
            name: _QueueHealth(_endpoint_of(self._group.queue(name)))
            for name in self._names
        }
        self._last_receive_at: float | None = None
        self._started_at: float | None = None

        self._work: collections.deque[Delivery] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._heartbeat = Heartbeat()
        self._processor = Processor(
            queues, self._handlers, self._heartbeat, self._hooks
        )
        self._poll = compose_poll(queues.middleware, self._poll_cycle)

    # -- public API --

    def run(self) -> int:
        """Poll and process until stopped; return the exit status.

        Returns 0 after a stop (``should_stop``, :meth:`request_stop` or a
        signal), 1 when every queue failed to receive
        :data:`MAX_RECEIVE_FAILURES` times in a row.
        """
        return contextvars.copy_context().run(self._run)

    def _run(self) -> int:
        _stop_event.set(self.stop_event)
        self._started_at = time.monotonic()
        self._start_threads()
        self._resolve_queues()
        try:
            self._hooks.worker_started(list(self._names))
        except Exception:
            log.exception("hook_failed", hook="worker_started")
        log.info(
            "worker_started",
            queues=self._names,
            concurrency=self._concurrency,
            job_types=sorted(self._handlers),
        )
        status, reason = EXIT_OK, "stop_requested"
        try:
            while True:
                if self._stop_requested:
                    break
                if self._should_stop():
                    reason = "should_stop"
                    break
                self._wait_for_free_slot()
                if self._stop_requested:
                    break
                self._poll()
                if self._every_queue_broken():
                    status, reason = EXIT_RECEIVE_FAILURES, "receive_failures"
                    log.error(
                        "worker_giving_up",
                        reason="every queue failed to receive"
                        f" {MAX_RECEIVE_FAILURES} times in a row",
                        errors={n: h.last_error for n, h in self._health.items()},
                    )
                    break
        finally:
            self._shutdown()
        log.info("worker_stopped", reason=reason, exit_status=status)
        try:
            self._hooks.worker_stopped(reason)
        except Exception:
            log.exception("hook_failed", hook="worker_stopped")
        return status

    def request_stop(self) -> None:
        """Stop gracefully: receive nothing more, let running jobs finish.

        Safe to call from any thread (and from a signal handler when the
        worker runs in another thread).
        """
        with self._cond:
            if not self._stop_requested:
                self._stop_requested = True
                self.stop_event.set()
                log.info("worker_stopping", running=self._running)
            self._cond.notify_all()
            self._work_ready.notify_all()

    def release_all(self) -> int:
        """Make every message this worker holds visible again at once.

        For a forced stop: running jobs are abandoned, so their messages go
        back to the queue for another worker. Returns how many were released.
        """
        leases = self._heartbeat.held()
        for lease in leases:
            self._heartbeat.release(lease)
        return _release(leases)

    @property
    def busy_slots(self) -> int:
        """How many jobs are running now."""
        return self._running

    @property
    def last_receive_age(self) -> float | None:
        """Seconds since a receive last completed (empty or not), or since the
        worker started if none has yet; None before :meth:`run`."""
        at = self._last_receive_at or self._started_at
        return None if at is None else time.monotonic() - at

    def queue_failures(self) -> dict[str, int]:
        """Consecutive receive failures per queue (0 for a healthy queue)."""
        return {name: health.failures for name, health in self._health.items()}

    def queue_errors(self) -> dict[str, str]:
        """The last receive error of each queue that is failing now."""
        return {
            name: health.last_error
            for name, health in self._health.items()
            if health.failures and health.last_error is not None
        }

    # -- start-up and shutdown --

    def _start_threads(self) -> None:
        self._heartbeat.start()
        self._receivers = concurrent.futures.ThreadPoolExecutor(
            max_workers=len(self._names) + self._max_fetches,
            thread_name_prefix="sqs-jobs-receive",
        )
        context = contextvars.copy_context()
        # With several slots, a job frees its slot when its handler returns and
        # its thread then settles the message; spare threads keep the slots busy.
        threads = 1 if self._concurrency == 1 else 2 * self._concurrency
        for index in range(threads):
            thread = threading.Thread(
                target=context.copy().run,
                args=(self._job_loop,),
                name=f"sqs-jobs-worker-{index}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def _resolve_queues(self) -> None:
        """Read each queue's settings once; a failure counts as a receive failure."""
        for name, queue in self._group.items():
            try:
                queue.prepare()
            except Exception as exc:
                self._record_failure(name, exc)

    def _shutdown(self) -> None:
        with self._cond:
            self._stop_requested = True
            self.stop_event.set()
        released = self._release_held()
        abandoned = not self._wait_for_running_jobs()
        if abandoned:
            released += self._abandon_running_jobs()
        with self._cond:
            while self._polling or self._fetching:
                self._cond.wait()
        released += self._release_held()
        self._receivers.shutdown(wait=False)
        if released:
            log.info("messages_released", count=released)
        with self._cond:
            self._cond.notify_all()
            self._work_ready.notify_all()
        if not abandoned:
            for thread in self._threads:
                thread.join()
        self._heartbeat.stop()

    def _wait_for_running_jobs(self) -> bool:
        """Wait for running jobs (up to the shutdown timeout); True if all finished."""
        deadline = (
            None
            if self._shutdown_timeout is None
            else time.monotonic() + self._shutdown_timeout
        )
        with self._cond:
            while self._running or self._work or self._active:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _abandon_running_jobs(self) -> int:
        """Past the shutdown deadline: abort running jobs and release their messages."""
        with self._cond:
            # Only jobs whose handler still runs (or never started): a job that
            # is settling its message already decided what happens to it.
            deliveries = list(self._slotted)
            self._work.clear()
        log.warning(
            "shutdown_timeout_reached",
            timeout_seconds=self._shutdown_timeout,
            abandoned=len(deliveries),
        )
        for delivery in deliveries:
            self._heartbeat.abandon(delivery.lease, "shutdown_timeout")
            delivery.abort.set()
        released = _release([d.lease for d in deliveries], even_failed=True)
        # Handlers that watch abort_requested get a moment to return, so their
        # job_finished (heartbeat_failed: the message is no longer theirs) is
        # logged before the process exits.
        deadline = time.monotonic() + ABORT_GRACE_SECONDS
        with self._cond:
            while self._active and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
        return released

    def _release_held(self) -> int:
        with self._cond:
            deliveries = [d for held in self._held.values() for d in held]
            for held in self._held.values():
                held.clear()
        for delivery in deliveries:
            self._heartbeat.release(delivery.lease)
        return _release([d.lease for d in deliveries])

    # -- the polling cycle --

    def _wait_for_free_slot(self) -> None:
        with self._cond:
            while self._running >= self._concurrency and not self._stop_requested:
                self._cond.wait()

    def _poll_cycle(self) -> None:
        with self._lock:
            free = self._concurrency - self._running
            if free <= 0 or self._stop_requested or self._dispatch_held(free):
                return
        if self._concurrency == 1:
            self._receive_in_order(free)
        else:
            self._pipeline()

    def _receive_in_order(self, free: int) -> None:
        """Try each queue in weighted order until one has a message (one slot).

        When none has, long-poll them all at once until the first news.
        """
        with self._lock:
            polling = set(self._polling)
        now = time.monotonic()
        ready = [n for n in self._group.polling_order() if self._health[n].ready(now)]
        if not (self._idle and self._idle_wait):
            for name in ready:
                if name in polling:
                    continue
                received_at = time.monotonic()
                messages = self._receive(name, free, 0)
                if messages:
                    with self._cond:
                        self._idle = False
                        self._hold(name, messages, received_at)
                        self._dispatch_held(free)
                    return
        if self._idle_wait:
            self._idle = True
            # A queue whose receive just failed waits for its backoff.
            now = time.monotonic()
            self._long_poll([n for n in ready if self._health[n].ready(now)], free)
        elif not ready:
            self._sleep_until_a_queue_is_ready()

    def _pipeline(self) -> None:
        """Keep receives in flight for the free slots; return on the first news.

        Queues with messages get short receives (several at once on a deep
        queue), sized to the slots not yet promised to another receive; a
        queue found empty is long-polled in the background instead, so a job
        sent to it starts at once even while other queues keep the worker busy.
        """
        with self._lock:
            self._start_receives()
            events = self._events
            # Computed once, as in _long_poll: a queue whose backoff ends drops
            # out of _next_ready_in(), which would then wait for the next one.
            retry_in = self._next_ready_in()
            retry_at = None if retry_in is None else time.monotonic() + retry_in
            while not (
                self._stop_requested
                or self._events != events
                or any(self._held.values())
            ):
                if retry_at is None and not (self._fetching or self._polling):
                    break  # idle_wait 0 and every queue empty: the cycle ends
                timeout = None if retry_at is None else retry_at - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                self._cond.wait(timeout)
            self._dispatch_held(self._concurrency - self._running)

    def _start_receives(self) -> None:
        """Start short receives and background long polls (call with the lock)."""
        if self._stop_requested:
            return
        now = time.monotonic()
        held = sum(len(h) for h in self._held.values())
        for name in self._group.polling_order():
            if not self._health[name].ready(now) or name in self._polling:
                continue
            if name in self._empty:
                self._start_long_poll(name, self._concurrency - self._running - held)
                continue
            unreserved = self._concurrency - self._running - held - self._reserved
            if (
                sum(self._fetching.values()) >= self._max_fetches
                or unreserved < self._next_fetch_size()
            ):
                continue
            size = min(MAX_BATCH_ENTRIES, unreserved)
            self._reserved += size
            self._fetching[name] += 1
            self._submit(self._fetch, name, size)

    def _next_fetch_size(self) -> int:
        """The fewest free slots worth another receive (call with the lock).

        The first receive takes whatever is free; more at once only when they
        can be large, or each would carry a message or two.
        """
        if not self._fetching:
            return 1
        return min(MAX_BATCH_ENTRIES, max(1, self._concurrency // 3))

    def _fetch(self, name: str, size: int) -> None:
        received_at = time.monotonic()
        messages = self._receive(name, size, 0)
        with self._lock:
            self._reserved -= size
            self._fetching[name] -= 1
            if not self._fetching[name]:
                del self._fetching[name]
            if messages:
                self._hold(name, messages, received_at)
            elif self._idle_wait and self._health[name].ready(time.monotonic()):
                self._empty.add(name)
            self._events += 1
            self._cond.notify_all()

    def _start_long_poll(self, name: str, free: int) -> None:
        self._polling.add(name)
        self._submit(
            self._background_receive, name, max(1, min(MAX_BATCH_ENTRIES, free))
        )

    def _submit(self, fn: cabc.Callable[..., None], *args: t.Any) -> None:
        self._receivers.submit(contextvars.copy_context().run, fn, *args)

    def _long_poll(self, ready: list[str], free: int) -> None:
        """Long-poll every ready queue at once; return on the first news."""
        with self._cond:
            for name in ready:
                if name not in self._polling and not self._stop_requested:
                    self._start_long_poll(name, free)
            completions = self._poll_completions
            # Computed once: a backed-off queue that is ready again drops out of
            # _next_ready_in(), so asking in the loop would never reach 0 and
            # the queue would wait for the other long polls to end.
            retry_in = self._next_ready_in()
            retry_at = None if retry_in is None else time.monotonic() + retry_in
            while not (
                self._stop_requested
                or self._poll_completions != completions
                or any(self._held.values())
            ):
                if retry_at is None and not self._polling:
                    break
                timeout = None if retry_at is None else retry_at - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                self._cond.wait(timeout)
            if any(self._held.values()):
                self._idle = False
                self._dispatch_held(self._concurrency - self._running)

    def _background_receive(self, name: str, max_messages: int) -> None:
        received_at = time.monotonic()
        messages = self._receive(name, max_messages, self._idle_wait)
        with self._cond:
            self._polling.discard(name)
            self._poll_completions += 1
            self._events += 1
            if messages:
                self._empty.discard(name)
                self._hold(name, messages, received_at)
            self._cond.notify_all()

    def _sleep_until_a_queue_is_ready(self) -> None:
        with self._cond:
            timeout = self._next_ready_in()
            if timeout is not None and not self._stop_requested:
                self._cond.wait(timeout)

    def _next_ready_in(self) -> float | None:
        """Seconds until the first backed-off queue may be polled again, or None."""
        now = time.monotonic()
        waits = [h.retry_at - now for h in self._health.values() if not h.ready(now)]
        return min(waits) if waits else None

    def _receive(self, name: str, max_messages: int, wait_seconds: int) -> list[t.Any]:
        queue = self._group.queue(name)
        if queue.is_fifo:
            # One receive may return several messages of one group, and run in
            # parallel they would break the group's order. Taken one at a time,
            # SQS itself holds the group back until the message is deleted.
            max_messages = 1
        try:
            queue.prepare()
            messages = queue.receive(max_messages, wait_seconds)
        except Exception as exc:
            self._record_failure(name, exc)
            return []
        health = self._health[name]
        if health.failures:
            log.info("receive_recovered", queue=name, failures=health.failures)
            health.failures = 0
            health.last_error = None
            health.unreachable = False
        if any(h.unreachable for h in self._health.values()):
            self._endpoint_reached(health.endpoint)
        self._last_receive_at = time.monotonic()
        if not messages:
            log.debug("receive_empty", queue=name, wait_seconds=wait_seconds)
        return list(messages)

    def _record_failure(self, name: str, error: Exception) -> None:
        with self._cond:
            health = self._health[name]
            backoff = health.record_failure(error, time.monotonic())
            self._cond.notify_all()
        log.warning(
            "receive_failed",
            queue=name,
            attempt=health.failures,
            retry_in_seconds=round(backoff, 2),
            error=health.last_error,
        )
        try:
            self._hooks.receive_failed(name, error)
        except Exception:
            log.exception("hook_failed", hook="receive_failed")

    def _endpoint_reached(self, endpoint: str) -> None:
        """A receive went through: retry at once the queues that could not connect.

        They share the endpoint that just answered, so their backoff would only
        keep them idle (and counting failures) while the endpoint is back.
        """
        now = time.monotonic()
        with self._cond:
            for name, health in self._health.items():
                if health.unreachable and health.endpoint == endpoint:
                    health.unreachable = False
                    if health.retry_at > now:
                        health.retry_at = now
                        log.info("receive_retry_brought_forward", queue=name)
            self._events += 1
            self._cond.notify_all()

    def _every_queue_broken(self) -> bool:
        return all(h.failures >= MAX_RECEIVE_FAILURES for h in self._health.values())

    # -- holding and dispatching messages (call with the lock held) --

    def _hold(self, name: str, messages: list[t.Any], received_at: float) -> None:
        queue = self._group.queue(name)
        held = self._held[name]
        for message in messages:
            lease = self._heartbeat.hold(
                queue,
                name,
                str(message.get("ReceiptHandle", "")),
                str(message.get("MessageId", "")),
                received_at,
            )
            held.append(Delivery(name, queue, message, lease))
        self._cond.notify_all()

    def _dispatch_held(self, free: int) -> bool:
        """Hand up to ``free`` held messages to job threads, in weighted order."""
        if self._stop_requested or free <= 0 or not any(self._held.values()):
            return False
        dispatched = 0
        for name in self._group.polling_order(n for n in self._names if self._held[n]):
            held = self._held[name]
            while held and dispatched < free:
                delivery = held.popleft()
                if delivery.lease.failed:
                    log.warning(
                        "held_message_lost",
                        queue=name,
                        message_id=delivery.message_id,
                        reason=delivery.lease.failure,
                    )
                    continue
                self._running += 1
                self._slotted.add(delivery)
                if self._concurrency > 1:
                    delivery.handler_done = functools.partial(self._free_slot, delivery)
                self._work.append(delivery)
                dispatched += 1
        if dispatched:
            self._work_ready.notify(dispatched)
        return dispatched > 0

    # -- job threads --

    def _job_loop(self) -> None:
        try:
            while True:
                with self._lock:
                    while not self._work and not self._stop_requested:
                        self._work_ready.wait()
                    if not self._work:
                        return
                    delivery = self._work.popleft()
                    self._active.add(delivery)
                try:
                    self._processor.process(delivery)
                except BaseException:
                    log.exception("job_thread_error", message_id=delivery.message_id)
                finally:
                    with self._lock:
                        self._free_slot(delivery)
                        self._active.discard(delivery)
                        if self._stop_requested:
                            self._cond.notify_all()
        finally:
            close_thread_loop()

    def _free_slot(self, delivery: Delivery) -> None:
        """Give the job's slot back (once), so the dispatcher may receive more."""
        with self._lock:
            if delivery in self._slotted:
                self._slotted.discard(delivery)
                self._running -= 1
                self._events += 1
                if self._slot_matters():
                    self._cond.notify_all()

    def _slot_matters(self) -> bool:
        """Whether a freed slot lets the dispatcher act (call with the lock).

        Waking it for every finished job would cost a thread switch per job.
        """
        if self._stop_requested or self._running == self._concurrency - 1:
            return True
        if any(self._held.values()):
            return True
        unreserved = self._concurrency - self._running - self._reserved
        return unreserved >= self._next_fetch_size()


def _release(leases: cabc.Sequence[Lease], *, even_failed: bool = False) -> int:
    """Set the visibility of each lease's message to 0, in batches per queue.

    Failed leases are skipped (the message may be someone else's by now)
    unless ``even_failed``: a lease this worker abandoned itself is still its own.
    """
    by_queue: dict[SqsQueue, list[str]] = collections.defaultdict(list)
    for lease in leases:
        if even_failed or not lease.failed:
            by_queue[lease.queue].append(lease.receipt_handle)
    released = 0
    for queue, receipts in by_queue.items():
        for start in range(0, len(receipts), MAX_BATCH_ENTRIES):
            chunk = receipts[start : start + MAX_BATCH_ENTRIES]
            errors = queue.change_visibility_many([(r, 0) for r in chunk])
            released += sum(error is None for error in errors)
            for error in errors:
                if error is not None:
                    log.warning(
                        "release_failed",
                        sqs_queue=queue.name,
                        error=f"{error[0]}: {error[1]}",
                    )
    return released
