"""Phase one of a job: read the message, enter the job's scope, run the handler.

The scope (the job's log context, its lease clock, the framework's job
context such as Flask's app context, ``current_job``) is entered here and
stays open until the message is settled, so ``job_finished`` is reported
inside it; the caller closes it with :meth:`Ran.close`.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import datetime as dt
import enum
import time
import typing as t

import structlog

from ..model import call_handler
from ..model import call_hook
from ..model import compose_consume
from ..model import Hooks
from ..model import Job
from ..model import JobHandler
from ..model import JobMiddleware
from ..model import loggable_text
from ..model import max_attempts
from ..model import MAX_DEFERRAL_SECONDS
from ..model import NonRetryableError
from ..model import Outcome
from ..model import received_job_id
from ..model import reset_current_job
from ..model import Retry
from ..model import set_current_job
from ..model import shown_job_id
from ..model import trim_correlation_fields
from ..sqs import decode_attributes
from ..sqs import decode_body
from ..sqs import DecodedBody
from ..sqs import fetch_job
from ..sqs import parse_run_at
from ..sqs import Pointer
from ..sqs import scheduled_for
from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._idempotent_run import JobGuard
from ._worker_counts import WorkerCounts

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")

#: Log keys correlation fields never bind: the keys the engine binds for every
#: job or puts on its own job lines, the keys structlog's processors and
#: renderers act on, and the attributes of a stdlib ``LogRecord`` (which
#: ``logging`` refuses to overwrite).
RESERVED_LOG_KEYS = frozenset(
    {
        # Bound for every job.
        "queue",
        "message_id",
        "receive_count",
        "job_type",
        "job_id",
        "sent_job_id",
        "trace_id",
        "span_id",
        # On job_started, job_finished and the engine's other job lines.
        "group_id",
        "queue_wait_ms",
        "outcome",
        "duration_ms",
        "processing_outcome",
        "error_type",
        "error",
        "reason",
        "retry_in_seconds",
        "attempt",
        "max_attempts",
        "next_attempt_at",
        "visibility_error",
        "ownership_lost",
        "dead_letter_queue",
        "run_at",
        "new_message_id",
        "dropped",
        "idempotency",
        # Acted on by structlog's processors and renderers.
        "event",
        "level",
        "log_level",
        "timestamp",
        "logger",
        "logger_name",
        "exception",
        "exc_info",
        "stack",
        "stack_info",
        "positional_args",
        # Attributes of logging.LogRecord.
        "name",
        "msg",
        "args",
        "levelname",
        "levelno",
        "pathname",
        "filename",
        "module",
        "exc_text",
        "lineno",
        "funcName",
        "created",
        "msecs",
        "relativeCreated",
        "thread",
        "threadName",
        "processName",
        "process",
        "taskName",
        "message",
        "asctime",
    }
)


#: The verdicts whose message is deleted (or dead-lettered).
DELETED_OUTCOMES = (Outcome.SUCCESS, Outcome.DELETE, Outcome.DUPLICATE)


class Kind(enum.Enum):
    """What a received message turned out to be."""

    #: A job whose handler ran (or could not start).
    JOB = "job"
    #: A job that is not due yet (``run_at`` more than a second ahead).
    DEFERRED = "deferred"
    #: Not a job at all (not JSON, no job_type, ...).
    MALFORMED = "malformed"
    #: A job of a type this worker has no handler for.
    UNKNOWN = "unknown"
    #: A large-payload pointer whose S3 object could not (or may not) be read.
    UNFETCHED = "unfetched"


@dataclasses.dataclass(eq=False)
class Ran:
    """A message after phase one, its scope still open."""

    delivery: Delivery
    kind: Kind
    scope: contextlib.ExitStack
    job: Job | None = None
    #: The handler's verdict before settling: success, retry or delete.
    outcome: Outcome = Outcome.SUCCESS
    exception: BaseException | None = None
    #: What the handler returned (on success).
    result: object = None
    #: Why a malformed message is not a job.
    reason: str = ""
    #: When a deferred job is due.
    run_at: dt.datetime | None = None
    #: Where the body was read from, for a large payload sent through S3.
    pointer: Pointer | None = None
    #: The handler's retry policy, once the handler was called.
    retry: Retry | None = None
    #: Extra fields for the ``job_finished`` line (``idempotency``).
    fields: dict[str, t.Any] = dataclasses.field(default_factory=dict)
    started: float = dataclasses.field(default_factory=time.monotonic)

    def close(self) -> None:
        """Leave the job's scope, handing it the handler's exception if any."""
        exc = self.exception if self.outcome is not Outcome.SUCCESS else None
        if exc is None:
            self.scope.__exit__(None, None, None)
        else:
            self.scope.__exit__(type(exc), exc, exc.__traceback__)


class JobRunner:
    """Turn a received message into a :class:`Ran`, running its handler."""

    def __init__(
        self,
        handlers: cabc.Mapping[str, JobHandler],
        middleware: cabc.Sequence[JobMiddleware],
        heartbeat: Heartbeat,
        hooks: Hooks,
        guard: JobGuard | None = None,
    ) -> None:
        self.handlers = handlers
        #: What the worker counts; the settler counts into the same.
        self.counts = WorkerCounts()
        self._middleware = tuple(middleware)
        self._heartbeat = heartbeat
        self._hooks = hooks
        self._guard = guard or JobGuard()

    def run(self, delivery: Delivery) -> Ran:
        """Run phase one; never raises ``Exception``.

        Call it in a context of its own (``contextvars.copy_context().run``):
        it binds the job's log fields there.
        """
        structlog.contextvars.bind_contextvars(
            queue=delivery.queue_name,
            message_id=delivery.message_id,
            receive_count=delivery.receive_count,
        )
        scope = contextlib.ExitStack()
        body, pointer = delivery.body, None
        large = delivery.queue.large_payloads
        if large is not None:
            found = large.read_pointer(body, delivery.attributes)
            if isinstance(found, str):
                return Ran(delivery, Kind.MALFORMED, scope, reason=found)
            if found is not None:
                try:
                    body, pointer = fetch_job(large, found), found
                except Exception as exc:
                    return Ran(
                        delivery, Kind.UNFETCHED, scope, exception=exc, pointer=found
                    )
        ran = self._run_body(delivery, scope, body)
        ran.pointer = pointer
        return ran

    def _run_body(
        self, delivery: Delivery, scope: contextlib.ExitStack, body: object
    ) -> Ran:
        decoded = body if isinstance(body, DecodedBody) else decode_body(body)
        if isinstance(decoded, str):
            return Ran(delivery, Kind.MALFORMED, scope, reason=decoded)
        job_id, invalid = received_job_id(decoded.job_id, delivery.message_id)
        structlog.contextvars.bind_contextvars(
            job_id=job_id, job_type=loggable_text(decoded.job_type)
        )
        if invalid:
            log.warning("job_id_invalid", sent_job_id=shown_job_id(decoded.job_id))
            self.counts.malformed(delivery.queue_name, "bad_job_id")
        handler = self.handlers.get(decoded.job_type)
        if handler is None:
            return Ran(delivery, Kind.UNKNOWN, scope)
        job = self._job(delivery, decoded, job_id)
        redrive = delivery.queue.redrive_policy()
        receives = None if redrive is None else redrive[1]
        job.max_attempts = max_attempts(handler.retry, receives)
        run_at = _due_time(decoded, delivery)
        if run_at is not None:
            ran = Ran(delivery, Kind.DEFERRED, scope, job=job, run_at=run_at)
            self._enter_job_context(ran)
            return ran
        return self._run_handler(Ran(delivery, Kind.JOB, scope, job=job), handler)

    def _job(self, delivery: Delivery, decoded: DecodedBody, job_id: str) -> Job:
        correlation_fields, trace_headers = decode_attributes(delivery.attributes)
        if correlation_fields:
            trimmed = trim_correlation_fields(correlation_fields, RESERVED_LOG_KEYS)
            structlog.contextvars.bind_contextvars(**trimmed.fields)
            if trimmed.changed:
                log.warning("correlation_fields_trimmed", **trimmed.counts())
        return Job(
            job_type=decoded.job_type,
            payload=decoded.payload,
            queue=delivery.queue_name,
            correlation_fields=correlation_fields,
            trace_headers=trace_headers,
            message_id=delivery.message_id,
            receive_count=delivery.receive_count,
            sent_at=delivery.sent_at,
            job_id=job_id,
            scheduled_for=scheduled_for(delivery.attributes, decoded.scheduled_for),
        )

    def _enter_job_context(self, ran: Ran) -> bool:
        assert ran.job is not None
        try:
            ran.scope.enter_context(self._hooks.job_context(ran.job))
        except Exception as exc:
            log.exception("job_context_failed")
            ran.outcome, ran.exception = Outcome.RETRY, exc
            return False
        return True

    def _run_handler(self, ran: Ran, handler: JobHandler) -> Ran:
        job, lease = t.cast(Job, ran.job), ran.delivery.lease
        if lease.tracked:
            limit = (
                handler.max_runtime_seconds or ran.delivery.queue.max_runtime_seconds
            )
            self._heartbeat.start_job(lease, limit, job.abort_requested)
        else:
            lease.abort = job.abort_requested
        if self._enter_job_context(ran):
            ran.retry = handler.retry
            try:
                self._guard.run(
                    ran, handler, lambda: self._call(job, ran.delivery, handler)
                )
            except BaseException as error:
                # SystemExit or KeyboardInterrupt from the handler: the message
                # is left for redelivery and the error goes on up.
                self._heartbeat.drop(lease)
                ran.scope.__exit__(type(error), error, error.__traceback__)
                raise
        if lease.tracked and ran.outcome in DELETED_OUTCOMES:
            # Still extended while the delete waits and travels: it must not
            # outlive the visibility timeout and let the job run twice.
            self._heartbeat.freeze(lease)
        else:
            self._heartbeat.drop(lease)
        return ran

    def _call(
        self, job: Job, delivery: Delivery, handler: JobHandler
    ) -> tuple[Outcome, BaseException | None, object]:
        returned: list[object] = [None]

        def start_and_call(job: Job) -> None:
            _log_started(delivery)
            call_hook("job_started", self._hooks.job_started, job)
            returned[0] = call_handler(handler.func, job.payload)

        token = set_current_job(job)
        try:
            compose_consume(self._middleware, start_and_call)(job)
        except NonRetryableError as exc:
            return Outcome.DELETE, exc, None
        except Exception as exc:
            return Outcome.RETRY, exc, None
        finally:
            reset_current_job(token)
        return Outcome.SUCCESS, None, returned[0]


def _log_started(delivery: Delivery) -> None:
    fields: dict[str, t.Any] = {}
    if delivery.group_id is not None:
        fields["group_id"] = delivery.group_id
    if delivery.sent_at_ms is not None:
        fields["queue_wait_ms"] = max(0, int(time.time() * 1000) - delivery.sent_at_ms)
    job_log.info("job_started", **fields)


def _due_time(decoded: DecodedBody, delivery: Delivery) -> dt.datetime | None:
    """Return ``run_at`` if the job is not due yet (more than a second ahead)."""
    if decoded.run_at is None or delivery.queue.is_fifo:
        return None
    run_at = parse_run_at(decoded.run_at)
    if run_at is None:
        log.warning("run_at_invalid", run_at=loggable_text(decoded.run_at, 64))
        return None
    ahead = (run_at - dt.datetime.now(dt.UTC)).total_seconds()
    if ahead <= 1:
        return None
    if ahead > MAX_DEFERRAL_SECONDS:
        # Another producer's run_at further ahead than enqueue allows would be
        # re-sent every 15 minutes for years: run it now instead, and say so.
        log.warning(
            "run_at_too_far",
            run_at=loggable_text(decoded.run_at, 64),
            max_deferral_seconds=MAX_DEFERRAL_SECONDS,
        )
        return None
    return run_at
