"""Phase two of a job: settle its message and report how it ended.

Settling deletes the message, sets its visibility or moves it on (deferral,
dead letter), per SPEC's outcome table; reporting writes ``job_finished`` and
calls the ``job_finished`` hook.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
import time
import typing as t

import structlog

from ..model import call_hook
from ..model import Hooks
from ..model import IdempotencyConflictError
from ..model import judge
from ..model import MAX_DELAY_SECONDS
from ..model import MAX_VISIBILITY_TIMEOUT
from ..model import Outcome
from ..model import Retry
from ..model import RetryJob
from ..model import Verdict
from ..sqs import after_delete
from ..sqs import CallError
from ..sqs import is_lost_ownership
from ..sqs import MALFORMED_BODY_CODES
from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._key_wait import send_back_later
from ._large_payloads_settling import settle_unread
from ._lease import VISIBILITY_WINDOW_SECONDS
from ._lease import WINDOW_MARGIN_SECONDS
from ._resend import copy_attributes
from ._resend import dead_letter_params
from ._retry_log import log_exhausted
from ._retry_log import log_retrying
from ._running import DELETED_OUTCOMES
from ._running import Kind
from ._running import Ran
from ._worker_counts import WorkerCounts

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")

#: An unknown job type (or a pointer this worker may not follow) stays
#: invisible at least this long, so a worker that knows it (a newer deploy) can
#: pick it up and this one does not spin on it.
UNKNOWN_JOB_TYPE_VISIBILITY = 300
_LEVELS = {
    Outcome.SUCCESS: "info",
    Outcome.DEFERRED: "info",
    Outcome.DUPLICATE: "info",
    Outcome.RETRY: "warning",
}


@dataclasses.dataclass
class Settled:
    outcome: Outcome
    exception: BaseException | None = None
    processing_outcome: Outcome | None = None
    fields: dict[str, t.Any] = dataclasses.field(default_factory=dict)


class Settler:
    """Settle messages after their handler ran, and report each job's end."""

    def __init__(
        self,
        heartbeat: Heartbeat,
        hooks: Hooks,
        known_job_types: t.Callable[[], list[str]],
        *,
        delete_linger: float = 0.0,
        counts: WorkerCounts | None = None,
    ) -> None:
        self.counts = counts or WorkerCounts()
        self._delete_linger = delete_linger
        self._heartbeat = heartbeat
        self._hooks = hooks
        self._known_job_types = known_job_types

    def settle(self, ran: Ran) -> Outcome | None:
        """Settle ``ran``'s message; return the job's outcome (None: not a job)."""
        try:
            return self._settle(ran)
        except Exception:
            log.exception("message_processing_failed")
            return None
        finally:
            self._heartbeat.drop(ran.delivery.lease)

    def _settle(self, ran: Ran) -> Outcome | None:
        delivery = ran.delivery
        if ran.kind is Kind.MALFORMED:
            # A reason decode_body does not give is a large-payload pointer's.
            code = MALFORMED_BODY_CODES.get(ran.reason, "bad_pointer")
            self.counts.malformed(delivery.queue_name, code)
            if self._discard_malformed(delivery, ran.reason):
                after_delete(delivery.queue, ran.pointer)
            return None
        if ran.kind is Kind.UNFETCHED:
            self._settle_unfetched(ran)
            return None
        if ran.kind is Kind.UNKNOWN:
            self.counts.unknown_job_type(delivery.queue_name)
            self._hide_unknown(delivery)
            return None
        if ran.kind is Kind.DEFERRED:
            assert ran.run_at is not None
            return self._report(ran, self._defer(delivery, ran.run_at))
        settled = self._settle_job(ran)
        if settled.outcome in DELETED_OUTCOMES:
            after_delete(delivery.queue, ran.pointer)
        return self._report(ran, settled)

    # -- messages that are not runnable jobs --

    def _discard_malformed(self, delivery: Delivery, reason: str) -> bool:
        """Delete a message that is not a job; return whether it was deleted."""
        self._heartbeat.drop(delivery.lease)
        error = delivery.queue.delete(delivery.receipt_handle)
        body = delivery.body
        log.error(
            "malformed_message_deleted"
            if error is None
            else "malformed_message_delete_failed",
            reason=reason,
            body_bytes=len(body.encode(errors="replace"))
            if isinstance(body, str)
            else None,
            error=describe(error),
        )
        return error is None

    def _hide(self, delivery: Delivery) -> tuple[int, CallError]:
        """Leave a message this worker cannot run for a while, for another one."""
        self._heartbeat.drop(delivery.lease)
        seconds = delivery.lease.cap_visibility(
            max(UNKNOWN_JOB_TYPE_VISIBILITY, delivery.queue.visibility_timeout or 0)
        )
        return _change_visibility(delivery, seconds)

    def _hide_unknown(self, delivery: Delivery) -> None:
        seconds, error = self._hide(delivery)
        log.warning(
            "unknown_job_type_deferred",
            visibility_timeout=seconds,
            known_job_types=self._known_job_types(),
            error=describe(error),
        )

    def _settle_unfetched(self, ran: Ran) -> None:
        """A large payload whose body was not read: ``_large_payloads_settling``."""
        delivery, exc = ran.delivery, ran.exception
        self._heartbeat.drop(delivery.lease)
        settle_unread(
            delivery,
            exc,
            dead_letter=lambda: self._dead_letter(delivery, exc),
            delete=lambda: self._delete(delivery, Settled(Outcome.DELETE, exc)),
            hide=lambda: self._hide(delivery),
        )

    def _defer(self, delivery: Delivery, run_at: dt.datetime) -> Settled:
        """Send the job again with the remaining delay, then delete this copy."""
        self._heartbeat.drop(delivery.lease)
        remaining = (run_at - dt.datetime.now(dt.UTC)).total_seconds()
        params: dict[str, t.Any] = {
            "MessageBody": delivery.body,
            "DelaySeconds": min(MAX_DELAY_SECONDS, max(0, math.ceil(remaining))),
        }
        attributes = copy_attributes(delivery.attributes)
        if attributes:
            params["MessageAttributes"] = attributes
        try:
            new_id = delivery.queue.send(params)
        except Exception as exc:
            log.warning("deferral_failed", error=str(exc))
            return Settled(Outcome.RETRY, exc)
        fields = {"run_at": run_at.isoformat(), "new_message_id": new_id}
        return self._delete(delivery, Settled(Outcome.DEFERRED, fields=fields))

    # -- jobs whose handler ran --

    def _settle_job(self, ran: Ran) -> Settled:
        delivery = ran.delivery
        result = Settled(ran.outcome, ran.exception)
        if delivery.lease.failed:
            result.fields["reason"] = delivery.lease.failure
            return Settled(
                Outcome.HEARTBEAT_FAILED, result.exception, fields=result.fields
            )
        if isinstance(result.exception, IdempotencyConflictError):
            moved = self._dead_letter(delivery, result.exception)
            if moved is not None:
                return moved
        sent = send_back_later(ran, result.exception)
        if sent is not None:
            result.fields.update(sent)
            return self._delete(delivery, result)
        if result.outcome in DELETED_OUTCOMES:
            return self._delete(delivery, result)
        if _is_last_receive(delivery):
            moved = self._dead_letter(delivery, result.exception)
            if moved is not None:
                return moved
        if ran.retry is not None:
            settled = self._apply_policy(ran, ran.retry, result)
            if settled is not None:
                return settled
        wanted = _retry_delay(delivery, result.exception, ran.retry)
        if wanted is not None:
            delay = delivery.lease.cap_visibility(wanted)
            if delay < wanted:
                result.fields["retry_capped_from_seconds"] = wanted
            delay, error = _change_visibility(delivery, delay, visible_now=wanted == 0)
            result.fields["retry_in_seconds"] = delay
            if error is not None:
                result.fields["visibility_error"] = describe(error)
        if result.outcome is Outcome.RETRY:
            log_retrying(ran, result.fields.get("retry_in_seconds"))
        return result

    def _apply_policy(self, ran: Ran, policy: Retry, result: Settled) -> Settled | None:
        """Settle a failed attempt its retry policy ends; None: retry it."""
        delivery, exc = ran.delivery, result.exception
        verdict = judge(policy, delivery.receive_count, exc)
        if verdict is Verdict.NOT_RETRYABLE:
            fields = {"reason": "not_retryable"}
            return self._delete(delivery, Settled(Outcome.DELETE, exc, fields=fields))
        if verdict is Verdict.RETRY:
            return None
        if delivery.queue.dead_letter_url() is not None:
            # None: the move failed; the next attempt tries it again.
            return self._dead_letter(delivery, exc)
        log_exhausted(ran, exc)
        fields = {"reason": "retries_exhausted"}
        return self._delete(delivery, Settled(Outcome.DELETE, exc, fields=fields))

    def _delete(self, delivery: Delivery, result: Settled) -> Settled:
        error = delivery.queue.delete(
            delivery.receipt_handle, linger=self._delete_linger
        )
        if error is None:
            return result
        result.fields.update(
            error=describe(error), ownership_lost=is_lost_ownership(error)
        )
        return Settled(
            Outcome.DELETE_FAILED, result.exception, result.outcome, result.fields
        )

    def _dead_letter(
        self, delivery: Delivery, exception: BaseException | None
    ) -> Settled | None:
        """Move a message that failed its last receive to the DLQ, with the reason.

        Returns None (and leaves the message to SQS's own redrive) when the
        move cannot be made.
        """
        url = delivery.queue.dead_letter_url()
        if url is None:
            return None
        try:
            delivery.queue.send(dead_letter_params(delivery, exception), url=url)
        except Exception as exc:
            log.warning("dead_letter_failed", error=str(exc))
            return None
        return self._delete(
            delivery,
            Settled(
                Outcome.DEAD_LETTERED, exception, fields={"dead_letter_queue": url}
            ),
        )

    # -- reporting --

    def _report(self, ran: Ran, result: Settled) -> Outcome:
        duration_ms = round((time.monotonic() - ran.started) * 1000, 2)
        fields: dict[str, t.Any] = {
            "outcome": result.outcome.value,
            "duration_ms": duration_ms,
        }
        if result.processing_outcome is not None:
            fields["processing_outcome"] = result.processing_outcome.value
        fields.update(ran.fields)
        fields.update(result.fields)
        exc = result.exception
        if exc is not None and result.outcome is not Outcome.SUCCESS:
            fields["error_type"] = type(exc).__name__
            if not isinstance(exc, RetryJob):
                fields["exc_info"] = exc
        getattr(job_log, _LEVELS.get(result.outcome, "error"))("job_finished", **fields)
        self.counts.outcome(result.outcome)
        assert ran.job is not None
        # The scope closes with the final verdict's exception (none on success).
        ran.outcome, ran.exception = result.outcome, exc
        if result.outcome is Outcome.SUCCESS:
            call_hook("job_succeeded", self._hooks.job_succeeded, ran.job, ran.result)
        call_hook(
            "job_finished",
            self._hooks.job_finished,
            ran.job,
            result.outcome,
            duration_ms,
            exc,
        )
        return result.outcome


def _retry_delay(
    delivery: Delivery, exception: BaseException | None, policy: Retry | None = None
) -> int | None:
    if isinstance(exception, RetryJob):
        return exception.delay_seconds
    if policy is not None:
        return policy.delay(delivery.receive_count)
    base = delivery.queue.retry_backoff_seconds
    if base is None:
        return None
    # Both bounded first, so that no receive count or base can overflow.
    exponent = min(max(0, delivery.receive_count - 1), 64)
    delay = min(
        MAX_VISIBILITY_TIMEOUT, min(base, MAX_VISIBILITY_TIMEOUT) * 2.0**exponent
    )
    # Whole seconds within [d, 2d], as SQS takes only ints.
    low = math.ceil(delay)
    high = max(low, math.floor(min(MAX_VISIBILITY_TIMEOUT, 2 * delay)))
    return random.randint(low, high)


def _change_visibility(
    delivery: Delivery, seconds: int, *, visible_now: bool = False
) -> tuple[int, CallError]:
    """Set the visibility, already capped to the receive's 12 hours.

    Returns the seconds set and the error. A cap of 0 means the window is
    spent: SQS would refuse more, and 0 would make the message visible at
    once, so nothing is sent. Only a caller asking for 0 gets 0. A server that
    counts the 12 hours from the send instead (moto does) refuses a message
    that waited long in the queue: the change is then sent again within that
    stricter window, rather than leaving the message soon visible.
    """
    if seconds == 0 and not visible_now:
        return 0, None
    error = delivery.queue.change_visibility(delivery.receipt_handle, seconds)
    if error is None or error[0] != "InvalidParameterValue" or seconds == 0:
        return seconds, error
    sent_at = delivery.sent_at
    if sent_at is None:
        return seconds, error
    left = math.floor(
        sent_at + VISIBILITY_WINDOW_SECONDS - WINDOW_MARGIN_SECONDS - time.time()
    )
    if not 0 < left < seconds:
        return seconds, error
    return left, delivery.queue.change_visibility(delivery.receipt_handle, left)


def _is_last_receive(delivery: Delivery) -> bool:
    policy = delivery.queue.redrive_policy()
    return policy is not None and delivery.receive_count >= policy[1]


def describe(error: CallError) -> str | None:
    return None if error is None else f"{error[0]}: {error[1]}"
