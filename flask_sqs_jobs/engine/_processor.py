"""One received message in, one outcome out: SPEC's outcome table and nothing else."""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import dataclasses
import datetime as dt
import math
import random
import threading
import time
import typing as t

import structlog

from ._current import reset_current_job
from ._current import set_current_job
from ._exceptions import NonRetryableError
from ._exceptions import RetryJob
from ._handlers import call_handler
from ._handlers import JobHandler
from ._heartbeat import Heartbeat
from ._heartbeat import Lease
from ._hooks import Hooks
from ._job import Job
from ._job import JSONObject
from ._middleware import compose_consume
from ._outcome import Outcome
from ._queue import CallError
from ._queue import is_lost_ownership
from ._queue import SqsQueue
from ._wire import DEAD_LETTER_ATTRIBUTE
from ._wire import decode_attributes
from ._wire import decode_body
from ._wire import DecodedBody
from ._wire import dump_json
from ._wire import format_utc
from ._wire import MAX_DELAY_SECONDS
from ._wire import MAX_MESSAGE_ATTRIBUTES
from ._wire import MAX_VISIBILITY_TIMEOUT
from ._wire import parse_run_at
from ._wire import string_attribute

if t.TYPE_CHECKING:
    from ._queue_group import QueueGroup

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")

#: An unknown job type stays invisible at least this long, so a worker that
#: knows it (a newer deploy) can pick it up and this one does not spin on it.
UNKNOWN_JOB_TYPE_VISIBILITY = 300
#: Log keys the engine binds for every job; correlation fields never replace them.
RESERVED_LOG_KEYS = frozenset(
    {
        "queue",
        "message_id",
        "receive_count",
        "job_type",
        "trace_id",
        "span_id",
        "event",
        "level",
        "timestamp",
        "logger",
    }
)
_LEVELS = {
    Outcome.SUCCESS: "info",
    Outcome.DEFERRED: "info",
    Outcome.RETRY: "warning",
}


@dataclasses.dataclass(eq=False)
class Delivery:
    """A received message the worker holds."""

    queue_name: str
    queue: SqsQueue
    message: cabc.Mapping[str, t.Any]
    lease: Lease
    #: The outcome once processed (None for a message that was not a job).
    outcome: Outcome | None = None
    #: The exception the handler raised, if any.
    exception: BaseException | None = None
    #: Set when the job must stop early (its max runtime or the shutdown
    #: deadline passed); the job's ``abort_requested``.
    abort: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Called once the handler returned, before the message is settled: a
    #: worker frees the job's slot there, so deleting never holds one.
    handler_done: cabc.Callable[[], None] = lambda: None

    @property
    def message_id(self) -> str:
        return str(self.message.get("MessageId", ""))

    @property
    def receipt_handle(self) -> str:
        return str(self.message.get("ReceiptHandle", ""))

    @property
    def system_attributes(self) -> cabc.Mapping[str, str]:
        attributes = self.message.get("Attributes")
        return attributes if isinstance(attributes, dict) else {}

    @property
    def receive_count(self) -> int:
        try:
            return int(self.system_attributes.get("ApproximateReceiveCount", 1))
        except (TypeError, ValueError, OverflowError):
            return 1

    @property
    def sent_at(self) -> float | None:
        """When SQS accepted the message (SentTimestamp), in epoch seconds."""
        try:
            return int(self.system_attributes["SentTimestamp"]) / 1000
        except (KeyError, TypeError, ValueError, OverflowError):
            return None


@dataclasses.dataclass
class _Result:
    outcome: Outcome
    exception: BaseException | None = None
    processing_outcome: Outcome | None = None
    fields: dict[str, t.Any] = dataclasses.field(default_factory=dict)


class Processor:
    """Run the handler for one received message and settle the message.

    Delivery is at least once: a handler may see the same job twice.
    """

    def __init__(
        self,
        group: QueueGroup,
        handlers: cabc.Mapping[str, JobHandler],
        heartbeat: Heartbeat,
        hooks: Hooks | None = None,
    ) -> None:
        self._group = group
        self._hooks = hooks or group.hooks
        self._middleware = group.middleware
        self._handlers = handlers
        self._heartbeat = heartbeat

    def process(self, delivery: Delivery) -> Outcome | None:
        """Process ``delivery`` in a context of its own; return its outcome.

        Returns None when the message was not a runnable job (malformed, or an
        unknown job type). Never raises ``Exception``.
        """
        return contextvars.copy_context().run(self._process, delivery)

    def _process(self, delivery: Delivery) -> Outcome | None:
        structlog.contextvars.bind_contextvars(
            queue=delivery.queue_name,
            message_id=delivery.message_id,
            receive_count=delivery.receive_count,
        )
        try:
            return self._process_bound(delivery)
        except Exception:
            self._heartbeat.release(delivery.lease)
            log.exception("message_processing_failed")
            return None

    def _process_bound(self, delivery: Delivery) -> Outcome | None:
        decoded = decode_body(delivery.message.get("Body"))
        if isinstance(decoded, str):
            self._discard_malformed(delivery, decoded)
            return None
        structlog.contextvars.bind_contextvars(job_type=decoded.job_type)
        handler = self._handlers.get(decoded.job_type)
        if handler is None:
            self._defer_unknown(delivery)
            return None
        correlation_fields, trace_headers = decode_attributes(
            delivery.message.get("MessageAttributes")
        )
        structlog.contextvars.bind_contextvars(
            **{
                k: v
                for k, v in correlation_fields.items()
                if k not in RESERVED_LOG_KEYS
            }
        )
        job = Job(
            job_type=decoded.job_type,
            payload=decoded.payload,
            queue=delivery.queue_name,
            correlation_fields=correlation_fields,
            trace_headers=trace_headers,
            message_id=delivery.message_id,
            receive_count=delivery.receive_count,
            sent_at=delivery.sent_at,
            abort_requested=delivery.abort,
        )
        run_at = _due_time(decoded, delivery.queue)
        if run_at is not None:
            started = time.monotonic()
            with self._hooks.job_context(job):
                return self._finish(
                    delivery, job, self._defer(delivery, run_at), started
                )
        return self._run(delivery, job, handler)

    # -- messages that are not runnable jobs --

    def _discard_malformed(self, delivery: Delivery, reason: str) -> None:
        self._heartbeat.release(delivery.lease)
        error = delivery.queue.delete(delivery.receipt_handle)
        body = delivery.message.get("Body")
        log.error(
            "malformed_message_deleted"
            if error is None
            else "malformed_message_delete_failed",
            reason=reason,
            body_bytes=len(body.encode(errors="replace"))
            if isinstance(body, str)
            else None,
            error=_describe(error),
        )

    def _defer_unknown(self, delivery: Delivery) -> None:
        self._heartbeat.release(delivery.lease)
        seconds = max(
            UNKNOWN_JOB_TYPE_VISIBILITY, delivery.queue.visibility_timeout or 0
        )
        error = delivery.queue.change_visibility(delivery.receipt_handle, seconds)
        log.warning(
            "unknown_job_type_deferred",
            visibility_timeout=seconds,
            known_job_types=sorted(self._handlers),
            error=_describe(error),
        )

    def _defer(self, delivery: Delivery, run_at: dt.datetime) -> _Result:
        """Send the job again with the remaining delay, then delete this copy."""
        self._heartbeat.release(delivery.lease)
        remaining = (run_at - dt.datetime.now(dt.UTC)).total_seconds()
        params: dict[str, t.Any] = {
            "MessageBody": delivery.message["Body"],
            "DelaySeconds": min(MAX_DELAY_SECONDS, max(0, math.ceil(remaining))),
        }
        attributes = _copy_attributes(delivery.message.get("MessageAttributes"))
        if attributes:
            params["MessageAttributes"] = attributes
        try:
            new_id = delivery.queue.send(params)
        except Exception as exc:
            log.warning("deferral_failed", error=str(exc))
            return _Result(Outcome.RETRY, exc)
        fields = {"run_at": run_at.isoformat(), "new_message_id": new_id}
        return self._settle_delete(delivery, _Result(Outcome.DEFERRED, fields=fields))

    # -- running a job --

    def _run(self, delivery: Delivery, job: Job, handler: JobHandler) -> Outcome:
        lease = delivery.lease
        started = time.monotonic()
        max_runtime = handler.max_runtime_seconds or delivery.queue.max_runtime_seconds
        if lease.tracked:
            self._heartbeat.start_job(lease, max_runtime, job.abort_requested)
        try:
            context = self._hooks.job_context(job)
            context.__enter__()
        except Exception as exc:
            log.exception("job_context_failed")
            self._heartbeat.release(lease)
            return self._finish(
                delivery,
                job,
                self._settle(delivery, job, _Result(Outcome.RETRY, exc)),
                started,
            )
        try:
            result = self._call(delivery, job, handler)
            if lease.tracked and result.outcome in (Outcome.SUCCESS, Outcome.DELETE):
                # Still extended while the delete waits and travels: it must
                # not outlive the visibility timeout and let the job run twice.
                self._heartbeat.settle(lease)
            else:
                self._heartbeat.release(lease)
            delivery.handler_done()
            result = self._settle(delivery, job, result)
            self._heartbeat.release(lease)
            outcome = self._finish(delivery, job, result, started)
        except BaseException as error:
            self._heartbeat.release(lease)
            context.__exit__(type(error), error, error.__traceback__)
            raise
        failure = result.exception if outcome is not Outcome.SUCCESS else None
        if failure is None:
            context.__exit__(None, None, None)
        else:
            context.__exit__(type(failure), failure, failure.__traceback__)
        return outcome

    def _call(self, delivery: Delivery, job: Job, handler: JobHandler) -> _Result:
        def start_and_call(job: Job) -> None:
            self._log_started(delivery)
            try:
                self._hooks.job_started(job)
            except Exception:
                log.exception("hook_failed", hook="job_started")
            call_handler(handler.func, job.payload)

        token = set_current_job(job)
        try:
            compose_consume(self._middleware, start_and_call)(job)
        except NonRetryableError as exc:
            return _Result(Outcome.DELETE, exc)
        except Exception as exc:
            return _Result(Outcome.RETRY, exc)
        finally:
            reset_current_job(token)
        return _Result(Outcome.SUCCESS)

    def _log_started(self, delivery: Delivery) -> None:
        fields: dict[str, t.Any] = {}
        attributes = delivery.system_attributes
        group_id = attributes.get("MessageGroupId")
        if group_id is not None:
            fields["group_id"] = group_id
        try:
            sent_ms = int(attributes["SentTimestamp"])
        except (KeyError, TypeError, ValueError, OverflowError):
            pass
        else:
            fields["queue_wait_ms"] = max(0, int(time.time() * 1000) - sent_ms)
        job_log.info("job_started", **fields)

    # -- settling the message --

    def _settle(self, delivery: Delivery, job: Job, result: _Result) -> _Result:
        """Delete the message or set its visibility, per the outcome."""
        if delivery.lease.failed:
            result.fields["reason"] = delivery.lease.failure
            return _Result(
                Outcome.HEARTBEAT_FAILED, result.exception, fields=result.fields
            )
        if result.outcome in (Outcome.SUCCESS, Outcome.DELETE):
            return self._settle_delete(delivery, result)
        if self._is_last_receive(delivery):
            moved = self._dead_letter(delivery, job, result.exception)
            if moved is not None:
                return moved
        delay = self._retry_delay(delivery, result.exception)
        if delay is not None:
            error = delivery.queue.change_visibility(delivery.receipt_handle, delay)
            result.fields["retry_in_seconds"] = delay
            if error is not None:
                result.fields["visibility_error"] = _describe(error)
        return result

    def _settle_delete(self, delivery: Delivery, result: _Result) -> _Result:
        error = delivery.queue.delete(delivery.receipt_handle)
        if error is None:
            return result
        result.fields.update(
            error=_describe(error), ownership_lost=is_lost_ownership(error)
        )
        return _Result(
            Outcome.DELETE_FAILED, result.exception, result.outcome, result.fields
        )

    def _retry_delay(
        self, delivery: Delivery, exception: BaseException | None
    ) -> int | None:
        if isinstance(exception, RetryJob):
            return exception.delay_seconds
        base = delivery.queue.retry_backoff_seconds
        if base is None:
            return None
        delay = min(MAX_VISIBILITY_TIMEOUT, base * 2 ** (delivery.receive_count - 1))
        # Whole seconds within [d, 2d], as SQS takes only ints.
        low = math.ceil(delay)
        high = max(low, math.floor(min(MAX_VISIBILITY_TIMEOUT, 2 * delay)))
        return random.randint(low, high)

    def _is_last_receive(self, delivery: Delivery) -> bool:
        policy = delivery.queue.redrive_policy()
        return policy is not None and delivery.receive_count >= policy[1]

    def _dead_letter(
        self, delivery: Delivery, job: Job, exception: BaseException | None
    ) -> _Result | None:
        """Move a message that failed its last receive to the DLQ, with the reason.

        Returns None (and leaves the message to SQS's own redrive) when the
        move cannot be made.
        """
        url = delivery.queue.dead_letter_url()
        if url is None:
            return None
        reason = {
            "error_type": type(exception).__name__ if exception is not None else None,
            "error": str(exception)[:1000] if exception is not None else None,
            "failed_at": format_utc(dt.datetime.now(dt.UTC)),
            "source_queue": delivery.queue_name,
            "receive_count": delivery.receive_count,
        }
        attributes = _copy_attributes(delivery.message.get("MessageAttributes"))
        attributes.pop(DEAD_LETTER_ATTRIBUTE, None)
        while len(attributes) >= MAX_MESSAGE_ATTRIBUTES:
            attributes.pop(next(reversed(attributes)))
        attributes[DEAD_LETTER_ATTRIBUTE] = string_attribute(dump_json(reason))
        params: dict[str, t.Any] = {
            "MessageBody": delivery.message["Body"],
            "MessageAttributes": attributes,
        }
        if delivery.queue.is_fifo:
            group_id = delivery.system_attributes.get("MessageGroupId") or "dead-letter"
            params["MessageGroupId"] = group_id
            params["MessageDeduplicationId"] = delivery.message_id[:128]
        try:
            delivery.queue.send(params, url=url)
        except Exception as exc:
            log.warning("dead_letter_failed", error=str(exc))
            return None
        return self._settle_delete(
            delivery,
            _Result(
                Outcome.DEAD_LETTERED, exception, fields={"dead_letter_queue": url}
            ),
        )

    # -- reporting --

    def _finish(
        self, delivery: Delivery, job: Job, result: _Result, started: float
    ) -> Outcome:
        delivery.outcome = result.outcome
        delivery.exception = result.exception
        duration_ms = round((time.monotonic() - started) * 1000, 2)
        fields: dict[str, t.Any] = {
            "outcome": result.outcome.value,
            "duration_ms": duration_ms,
        }
        if result.processing_outcome is not None:
            fields["processing_outcome"] = result.processing_outcome.value
        fields.update(result.fields)
        exc = result.exception
        if exc is not None and result.outcome is not Outcome.SUCCESS:
            fields["error_type"] = type(exc).__name__
            if not isinstance(exc, RetryJob):
                fields["exc_info"] = exc
        getattr(job_log, _LEVELS.get(result.outcome, "error"))("job_finished", **fields)
        try:
            self._hooks.job_finished(job, result.outcome, duration_ms, exc)
        except Exception:
            log.exception("hook_failed", hook="job_finished")
        return result.outcome


def _due_time(decoded: DecodedBody, queue: SqsQueue) -> dt.datetime | None:
    """Return ``run_at`` if the job is not due yet (more than a second ahead)."""
    if decoded.run_at is None or queue.is_fifo:
        return None
    run_at = parse_run_at(decoded.run_at)
    if run_at is None:
        log.warning("run_at_invalid", run_at=decoded.run_at[:64])
        return None
    if (run_at - dt.datetime.now(dt.UTC)).total_seconds() <= 1:
        return None
    return run_at


def _copy_attributes(attributes: object) -> dict[str, JSONObject]:
    """Return received message attributes in the shape SendMessage accepts."""
    copied: dict[str, JSONObject] = {}
    if not isinstance(attributes, dict):
        return copied
    for name, attribute in attributes.items():
        if not isinstance(attribute, dict) or "DataType" not in attribute:
            continue
        kept = {
            k: attribute[k]
            for k in ("DataType", "StringValue", "BinaryValue")
            if k in attribute
        }
        if len(kept) > 1:
            copied[name] = kept
    return copied


def _describe(error: CallError) -> str | None:
    return None if error is None else f"{error[0]}: {error[1]}"
