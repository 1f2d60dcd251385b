"""Job records: a :class:`Hooks` subclass that writes each job's transitions.

Enabled when the app has a store and ``SQS_JOBS_RECORD_JOBS`` is on. Every
write goes through a :class:`RecordWriter`, so recording never changes a
job's outcome nor holds it up: a failed write is logged (``job_record_failed``),
counted (``sqs_jobs_store_errors_total``) and reported to the app's hooks
(``worker_error``, kind ``"store"``), and the job goes on.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog

from ...engine.model import Hooks
from ...engine.model import Job
from ...engine.model import loggable_text
from ...engine.model import MultiHooks
from ...engine.model import Outcome
from ...engine.model import report_error
from ...engine.sqs import result_json
from ...engine.sqs import ResultNotKept
from .. import model as r
from ._mode import RecordMode
from ._writer import RecordWriter

if t.TYPE_CHECKING:
    from ..model import JobStore

log = structlog.get_logger(__name__)

#: Outcome -> status. ``heartbeat_failed`` and ``delete_failed`` leave the
#: message in the queue, so the job will run again: it is retrying.
STATUS_OF_OUTCOME = {
    "success": r.SUCCEEDED,
    "retry": r.RETRYING,
    "delete": r.FAILED,
    "dead_lettered": r.DEAD_LETTERED,
    "deferred": r.DEFERRED,
    "duplicate": r.DUPLICATE,
    "expired": r.EXPIRED,
    "cancelled": r.CANCELLED,
    "limited": r.LIMITED,
    "heartbeat_failed": r.RETRYING,
    "delete_failed": r.RETRYING,
}
#: Statuses after which the job is done (``finished_at`` is set).
FINAL = r.FINAL
#: Characters of an error message kept.
MAX_ERROR_TEXT = 1000
#: The largest payload a failed record keeps, as JSON (a result's bound).
MAX_PAYLOAD_BYTES = 65536


class RecordingHooks(Hooks):
    """Write a job record at each moment of a job's life.

    Called from any thread (web requests, slot threads) with no lock held;
    it keeps no state of its own: each hook hands one event to the writer.

    :param writer: where the writes go (asynchronous by default).
    :param mode: which jobs are recorded (``SQS_JOBS_RECORD_MODE``).
    :param failed_payloads: a ``failed`` or ``dead_lettered`` record keeps
        the job's payload (as JSON, at most :data:`MAX_PAYLOAD_BYTES`).
    """

    def __init__(
        self,
        writer: RecordWriter,
        mode: RecordMode | None = None,
        *,
        failed_payloads: bool = False,
    ) -> None:
        self.writer = writer
        self.mode = mode or RecordMode()
        self.failed_payloads = failed_payloads

    def job_enqueued(self, job: Job, message_id: str) -> None:
        """Record ``queued`` (attempts 0) once the job's message was sent.

        Never moves a record back: a worker's ``running`` written first wins.
        """
        now = _now()
        self._submit(job, r.QUEUED, 0, now, enqueued_at=now)

    def job_started(self, job: Job) -> None:
        """Record ``running`` for this delivery, from the runner's slot thread.

        Clears the previous attempt's result and error; it also applies over
        a deferred or dead-lettered record, whatever its attempt (a redrive).
        """
        now = _now()
        self._submit(
            job,
            r.RUNNING,
            _attempts(job),
            now,
            enqueued_at=_sent_at(job),
            started_at=now,
        )

    def job_progress(self, job: Job, fraction: float, message: str | None) -> None:
        """Record the handler's progress; the status stays ``running``."""
        self._submit(
            job,
            r.PROGRESS,
            _attempts(job),
            _now(),
            progress=fraction,
            progress_message=message,
        )

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
        *,
        result: object = None,
        will_retry: bool = False,
    ) -> None:
        """Record the settled outcome: its status, times, result or error.

        Called by the runner's reporting once the message is settled. Skips
        a delivery that did not run because another delivery holds its
        idempotency key: that record is the holder's. When an earlier delivery
        of the same job completed the key, the job is done: the record
        becomes ``succeeded`` with the kept result, unless it is finished
        already (the earlier delivery's own write was lost with its process,
        or said ``retrying`` when its delete failed). A run that completed its
        key is ``succeeded`` even when its delete failed.
        """
        runtime = job._runtime
        status = STATUS_OF_OUTCOME.get(str(outcome), r.RETRYING)
        if runtime is not None and runtime.key_holder == job.job_id:
            if status != r.DUPLICATE:
                return  # not run: the key is held (in progress) or conflicts
            status = r.SUCCEEDED
        elif runtime is not None and runtime.key_completed and status == r.RETRYING:
            # Its delete or a heartbeat failed, but this run completed the key:
            # the job is done, and a later delivery is a duplicate.
            status = r.SUCCEEDED
        now = _now()
        kept = error = None
        if status == r.SUCCEEDED:
            kept, error = _result_text(result)
        if status not in (r.SUCCEEDED, r.DUPLICATE, r.DEFERRED, r.LIMITED):
            error = _error_text(exception, str(outcome))
        self._submit(
            job,
            status,
            _attempts(job),
            now,
            enqueued_at=_sent_at(job),
            # Not started (a running job cancelled keeps its running start).
            started_at=None
            if status in (r.DEFERRED, r.EXPIRED, r.CANCELLED, r.LIMITED)
            else now - dt.timedelta(milliseconds=duration_ms),
            finished_at=now if status in FINAL else None,
            result=kept,
            error=error,
            payload=self._payload(job, status),
        )

    def _payload(self, job: Job, status: str) -> str | None:
        """The payload a failed record keeps, or None (off, other status, too large)."""
        if not self.failed_payloads or status not in (r.FAILED, r.DEAD_LETTERED):
            return None
        try:
            text = result_json(job.payload)
        except Exception:  # a payload too large, or one that no longer encodes
            return None
        return text if len(text.encode()) <= MAX_PAYLOAD_BYTES else None

    def worker_stopped(self, reason: str) -> None:
        """Give the writer up to 5 seconds to write what is queued."""
        self.writer.flush(timeout=5.0)

    def _submit(
        self, job: Job, status: str, attempts: int, at: dt.datetime, **fields: t.Any
    ) -> None:
        if job.job_id is None or not self.mode.keeps(job.job_id, status):
            return
        self.writer.submit(
            r.JobEvent(
                job_id=job.job_id,
                job_type=job.job_type[:255],
                queue=job.queue,
                status=status,
                attempts=attempts,
                at=at,
                tags=job.tags,
                **fields,
            )
        )


def with_records(
    hooks: Hooks,
    store: JobStore | None,
    *,
    enabled: bool,
    retention_seconds: int,
    synchronous: bool,
    mode: str | float = "all",
    failed_payloads: bool = False,
) -> Hooks:
    """``hooks``, plus :class:`RecordingHooks` when job records are on.

    :param synchronous: write each record at once, in the caller's thread
        (eager mode), instead of from the writer's thread.
    :param mode: ``SQS_JOBS_RECORD_MODE`` (checked): which jobs are recorded.
    :param failed_payloads: failed and dead-lettered records keep the payload.

    Called once per app by the extension's ``init_app``; it makes the app's
    one writer, whose failures reach ``hooks`` as ``worker_error`` (kind
    ``"store"``).
    """
    if store is None or not enabled:
        return hooks

    def failed(queue: str | None, error: BaseException) -> None:
        report_error(hooks, queue, error, "store")

    writer = RecordWriter(
        lambda: store.job_records(retention_seconds=retention_seconds),
        synchronous=synchronous,
        on_error=failed,
    )
    recording = RecordingHooks(
        writer, RecordMode.of(mode), failed_payloads=failed_payloads
    )
    return MultiHooks([hooks, recording])


def recorder_of(hooks: Hooks) -> RecordingHooks | None:
    """The :class:`RecordingHooks` among ``hooks``, if any.

    Used by ``get_job`` to flush this process's pending writes first.
    """
    if isinstance(hooks, RecordingHooks):
        return hooks
    if isinstance(hooks, MultiHooks):
        for each in hooks.hooks:
            if isinstance(each, RecordingHooks):
                return each
    return None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _attempts(job: Job) -> int:
    return job.receive_count or 1


def _sent_at(job: Job) -> dt.datetime | None:
    if job.sent_at is None:
        return None
    return dt.datetime.fromtimestamp(job.sent_at, dt.UTC)


def _result_text(result: object) -> tuple[str | None, str | None]:
    """The result's JSON, or None and why it is not recorded (the record's error)."""
    if result is None:
        return None, None
    try:
        return result_json(result), None
    except ResultNotKept as exc:
        log.warning("job_result_not_recorded", reason=str(exc))
        return None, f"result not recorded: {exc}"
    except Exception as exc:  # a result whose own encoding hooks raise
        reason = f"it could not be encoded ({type(exc).__name__})"
        log.warning("job_result_not_recorded", reason=reason)
        return None, f"result not recorded: {reason}"


def _error_text(exception: BaseException | None, outcome: str) -> str:
    if exception is None:
        return outcome
    name = type(exception).__name__
    try:
        message = loggable_text(str(exception), MAX_ERROR_TEXT)
    except Exception:  # an exception whose __str__ raises still gets a record
        return name
    return f"{name}: {message}" if message else name
