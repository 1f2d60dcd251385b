"""A writer thread that batches job-record writes off the job's path.

A job hands its record's transitions to a bounded queue and goes on at once;
one thread per process writes them in order, up to a batch per transaction.
A slow or dead store therefore never slows a job: when the queue is full, new
writes are dropped and counted, as failed writes are. A write the store refuses
because the job id's record belongs to another job type (a message reusing
another job's id) is logged once per job id and type, and counted.
Each failure is handed to ``on_error`` too (the app's hooks:
``worker_error``, kind ``"store"``).
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import os
import queue
import threading
import time

import structlog

from ...engine.model import loggable_text
from ...engine.ops import count_store_error
from ..model import JobEvent
from ..model import JobRecords
from ..model import RefusedWrite

log = structlog.get_logger(__name__)

#: The part of the store counted in ``sqs_jobs_store_errors_total``.
PART = "job_records"
#: The part counting writes refused for their job type.
REFUSED_PART = "job_record_conflicts"
#: Refusals remembered, so each job id and type is logged once.
MAX_REFUSALS_REMEMBERED = 1000
#: Writes waiting at most; beyond it new ones are dropped.
MAX_PENDING = 10_000
#: Writes per transaction at most.
BATCH_SIZE = 200
#: A full queue is logged at most this often (seconds).
DROP_LOG_INTERVAL = 10.0
#: The writer thread's waits (seconds) before writing a failed batch again, so
#: a database restarting loses no record; then the batch is dropped.
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)


class RecordWriter:
    """Write :class:`JobEvent` batches to the store's records from one thread.

    :param records: makes the store's records (called once, in the thread).
    :param synchronous: write each event in the caller's thread instead (eager
        mode, so a test sees the record as soon as ``enqueue`` returns).
    :param on_error: called with the queue of the failed writes (None when
        they span several) and the error, on the writer's thread; it must not
        raise.

    Shared by every thread of the process: :meth:`submit` and :meth:`flush`
    take no lock of the caller's; the queue and the thread are this object's,
    restarted in a forked child.

    Cost: one ``JobRecords.write`` per batch of up to :data:`BATCH_SIZE`
    events, so a busy process makes one store round trip per batch rather
    than per transition. Each process has its own writer: hundreds of
    processes mean as many concurrent writers, whose conditional writes keep
    each record's newest transition.
    """

    def __init__(
        self,
        records: cabc.Callable[[], JobRecords],
        *,
        synchronous: bool = False,
        max_pending: int = MAX_PENDING,
        on_error: cabc.Callable[[str | None, BaseException], None] | None = None,
    ) -> None:
        self._make_records = records
        self._on_error = on_error
        self._records: JobRecords | None = None
        self._synchronous = synchronous
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._pid = -1
        self._queue: queue.Queue[JobEvent] = queue.Queue(max_pending)
        self._dropped = 0
        self._dropped_logged_at = 0.0
        self._refusals: collections.OrderedDict[tuple[str, str], None] = (
            collections.OrderedDict()
        )

    def submit(self, event: JobEvent) -> None:
        """Queue ``event`` for writing; never blocks, never raises.

        Called from any thread by :class:`RecordingHooks`. The first call in
        a process (or after a fork) starts the writer thread. When
        :data:`MAX_PENDING` writes are waiting, the event is dropped, counted
        and reported instead.
        """
        if self._synchronous:
            self._write([event])
            return
        if self._pid != os.getpid():
            self._start()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._drop()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queued writes; True when done.

        Called by ``get_job`` (to read this process's own writes) and at the
        worker's stop. A failed write counts as done.
        """
        deadline = time.monotonic() + timeout
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            # A fresh queue and thread in a forked child: the parent's thread
            # did not survive the fork, and neither may its connections.
            self._queue = queue.Queue(self._max_pending)
            self._records = None
            thread = threading.Thread(
                target=self._run, name="sqs-jobs-record-writer", daemon=True
            )
            thread.start()
            self._pid = os.getpid()

    def _run(self) -> None:
        """The writer thread: take what is queued, up to a batch, and write it.

        Blocks on an empty queue; never ends (a daemon thread), so writes
        still queued when the process exits are lost unless flushed first.
        """
        pending = self._queue
        while True:
            batch = [pending.get()]
            while len(batch) < BATCH_SIZE:
                try:
                    batch.append(pending.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch, RETRY_DELAYS)
            finally:
                for _ in batch:
                    pending.task_done()

    def _write(
        self, batch: list[JobEvent], retry_delays: cabc.Sequence[float] = ()
    ) -> None:
        """Write ``batch``, again after each of ``retry_delays`` while it fails.

        A final failure is counted, logged and reported, not raised. Writing a
        batch again is safe: each write is a conditional upsert.
        """
        delays = iter(retry_delays)
        while True:
            try:
                if self._records is None:
                    self._records = self._make_records()
                refused = self._records.write(batch)
                break
            except Exception as exc:
                delay = next(delays, None)
                if delay is None:
                    self._failed(batch, exc)
                    return
                time.sleep(delay)
        for each in refused or ():
            self._refused(each)

    def _failed(self, batch: list[JobEvent], exc: Exception) -> None:
        """Count, log and report a batch given up on."""
        count_store_error(PART, len(batch))
        log.warning(
            "job_record_failed",
            writes=len(batch),
            job_id=batch[0].job_id,
            error_type=type(exc).__name__,
            error=loggable_text(str(exc)),
        )
        queues = {event.queue for event in batch}
        self._report(queues.pop() if len(queues) == 1 else None, exc)

    def _refused(self, refused: RefusedWrite) -> None:
        """Count each refusal; log it once per job id and type (lock held briefly)."""
        key = (refused.job_id, refused.job_type)
        with self._lock:
            if key in self._refusals:
                return
            self._refusals[key] = None
            if len(self._refusals) > MAX_REFUSALS_REMEMBERED:
                self._refusals.popitem(last=False)
        count_store_error(REFUSED_PART)
        log.warning(
            "job_record_refused",
            job_id=refused.job_id,
            recorded_job_type=loggable_text(refused.recorded_job_type),
            refused_job_type=loggable_text(refused.job_type),
            reason="the job id's record belongs to another job type",
        )

    def _drop(self) -> None:
        """Count a dropped write; log and report the drops at most once per
        :data:`DROP_LOG_INTERVAL` seconds (the count under the lock)."""
        count_store_error(PART)
        now = time.monotonic()
        with self._lock:
            self._dropped += 1
            if now - self._dropped_logged_at < DROP_LOG_INTERVAL:
                return
            dropped, self._dropped = self._dropped, 0
            self._dropped_logged_at = now
        error = f"more than {self._max_pending} record writes waiting; dropped"
        log.warning(
            "job_record_failed", writes=dropped, error_type="QueueFull", error=error
        )
        self._report(None, queue.Full(error))

    def _report(self, queue_name: str | None, error: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(queue_name, error)
