"""Phase two of a job: settle its message, then report how the job ended.

Settling decides what becomes of the message in SQS, per SPEC's outcome
table: it is deleted, made visible later, moved on (deferral, dead letter)
or left alone. In this package *settle* means only that; the settle result
(:class:`~._reporting.Settled`) is its own value, and the report
(``job_finished``) is made from it.
"""

from __future__ import annotations

import datetime as dt
import math
import typing as t

import structlog

from ..model import as_multi
from ..model import Hooks
from ..model import IdempotencyConflictError
from ..model import judge
from ..model import MAX_DELAY_SECONDS
from ..model import Outcome
from ..model import report_error
from ..model import Retry
from ..model import RetryJob
from ..model import Verdict
from ..model import WorkerCounts
from ..sqs import after_delete
from ..sqs import CallError
from ..sqs import CallFailed
from ..sqs import format_utc
from ..sqs import is_lost_ownership
from ..sqs import MALFORMED_BODY_CODES
from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._key_wait import send_back_later
from ._large_payloads_settling import settle_unread
from ._ran import DELETED_OUTCOMES
from ._ran import Kind
from ._ran import Ran
from ._reporting import log_exhausted
from ._reporting import log_retrying
from ._reporting import Report
from ._reporting import Settled
from ._settle_calls import change_visibility
from ._settle_calls import copy_attributes
from ._settle_calls import dead_letter_params
from ._settle_calls import describe
from ._settle_calls import is_last_receive
from ._settle_calls import retry_delay

log = structlog.get_logger(__name__)

#: An unknown job type (or a pointer this worker may not follow) stays
#: invisible at least this long, so a worker that knows it (a newer deploy) can
#: pick it up and this one does not spin on it.
UNKNOWN_JOB_TYPE_VISIBILITY = 300


class Settler:
    """Settle messages after their handler ran, and report each job's end.

    One per worker (and per eager queue group), shared by the slot threads:
    :meth:`settle` runs on the job's thread after its slot was freed, inside
    the job's scope, with no lock held. It keeps nothing between jobs. Every
    SQS call it makes for a message goes through the message's queue (deletes
    and visibility changes are group-committed there); a failed one is logged
    and reported to the hooks (``worker_error``, kind ``"settle"``). The
    lease is released from the heartbeat (``drop``) before any call that
    decides the message's fate, and always when :meth:`settle` returns.

    :param heartbeat: the worker's heartbeat, which owns the leases.
    :param hooks: the worker's hooks, told of each job's end.
    :param known_job_types: the job types this worker runs, for the line
        about an unknown one.
    :param delete_linger: how long a delete may wait to share a batch request.
    """

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
        self._hooks = as_multi(hooks)
        self._known_job_types = known_job_types
        self._report = Report(self._hooks, self.counts)

    def settle(self, ran: Ran) -> Outcome | None:
        """Settle ``ran``'s message; return the job's outcome (None: not a job).

        Never raises ``Exception``; ``ran`` is left as it is.
        """
        try:
            return self._settle(ran)
        except Exception as exc:
            log.exception("message_processing_failed")
            report_error(self._hooks, ran.delivery.queue_name, exc, "settle")
            return None
        finally:
            self._heartbeat.drop(ran.delivery.lease)

    def _failed(self, delivery: Delivery, operation: str, error: CallError) -> None:
        """Report a failed call settling ``delivery`` (when it failed)."""
        if error is not None:
            failure = CallFailed(operation, error)
            report_error(self._hooks, delivery.queue_name, failure, "settle")

    def _settle(self, ran: Ran) -> Outcome | None:
        """Settle by what the message turned out to be; report a job's end."""
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
        if ran.kind is Kind.EXPIRED or ran.kind is Kind.CANCELLED:
            settled = self._delete_unrun(ran)
        else:
            settled = self._settle_job(ran)
        if settled.outcome in DELETED_OUTCOMES:
            after_delete(delivery.queue, ran.pointer)
        return self._report(ran, settled)

    # -- messages that are not runnable jobs --

    def _discard_malformed(self, delivery: Delivery, reason: str) -> bool:
        """Delete a message that is not a job; return whether it was deleted."""
        self._heartbeat.drop(delivery.lease)
        error = delivery.delete()
        self._failed(delivery, "DeleteMessage", error)
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
        return change_visibility(delivery, seconds)

    def _hide_unknown(self, delivery: Delivery) -> None:
        """Hide an unknown job type for a while, for a worker that knows it."""
        seconds, error = self._hide(delivery)
        self._failed(delivery, "ChangeMessageVisibility", error)
        log.warning(
            "unknown_job_type_deferred",
            visibility_timeout=seconds,
            known_job_types=self._known_job_types(),
            error=describe(error),
        )

    def _settle_unfetched(self, ran: Ran) -> None:
        """A large payload whose body was not read: ``_large_payloads_settling``."""
        delivery, exc = ran.delivery, ran.handled.exception
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
            report_error(self._hooks, delivery.queue_name, exc, "settle")
            return Settled(Outcome.RETRY, exc)
        fields = {"run_at": run_at.isoformat(), "new_message_id": new_id}
        return self._delete(delivery, Settled(Outcome.DEFERRED, fields=fields))

    def _delete_unrun(self, ran: Ran) -> Settled:
        """Delete a job that must not run: expired, or cancelled before it started."""
        self._heartbeat.drop(ran.delivery.lease)
        if ran.kind is Kind.CANCELLED:
            return self._delete(ran.delivery, Settled(Outcome.CANCELLED))
        assert ran.run_at is not None
        fields = {"expires_at": format_utc(ran.run_at)}
        return self._delete(ran.delivery, Settled(Outcome.EXPIRED, fields=fields))

    # -- jobs whose handler ran --

    def _settle_job(self, ran: Ran) -> Settled:
        """Settle a job whose handler ran (or could not start), in SPEC's order.

        A lost lease leaves the message alone; an idempotency conflict is
        dead-lettered; a job that is done is deleted; a failure on the last
        receive is dead-lettered; a retry policy may end the job; otherwise
        the job waits its retry delay (when it has one) and comes back.
        """
        delivery = ran.delivery
        result = Settled(ran.handled.outcome, ran.handled.exception)
        if delivery.lease.failed:
            result.fields["reason"] = delivery.lease.failure
            return Settled(
                Outcome.HEARTBEAT_FAILED, result.exception, fields=result.fields
            )
        if result.outcome is Outcome.LIMITED:
            return self._limited(ran, result)
        if ran.job is not None and ran.job.cancel_requested.is_set():
            # Cancelled while it ran: whatever the handler did, it is done.
            cancelled = Settled(Outcome.CANCELLED, result.exception)
            return self._delete(delivery, cancelled)
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
        if is_last_receive(delivery):
            moved = self._dead_letter(delivery, result.exception)
            if moved is not None:
                return moved
        if ran.retry is not None:
            settled = self._apply_policy(ran, ran.retry, result)
            if settled is not None:
                return settled
        wanted = retry_delay(delivery, result.exception, ran.retry)
        if wanted is not None:
            delay = delivery.lease.cap_visibility(wanted)
            if delay < wanted:
                result.fields["retry_capped_from_seconds"] = wanted
            delay, error = change_visibility(delivery, delay, visible_now=wanted == 0)
            result.fields["retry_in_seconds"] = delay
            if error is not None:
                result.fields["visibility_error"] = describe(error)
                self._failed(delivery, "ChangeMessageVisibility", error)
        if result.outcome is Outcome.RETRY:
            log_retrying(ran, result.fields.get("retry_in_seconds"))
        return result

    def _limited(self, ran: Ran, result: Settled) -> Settled:
        """A job a limit refused: back after its delay, never dead-lettered.

        Sent again on a standard queue (its receive count starts again);
        on a FIFO queue its visibility is set, which SQS counts as a receive.
        """
        delivery, exc = ran.delivery, result.exception
        assert isinstance(exc, RetryJob)
        result.fields["limit"] = getattr(exc, "limit", None)
        sent = send_back_later(ran, exc)
        if sent is not None:
            result.fields.update(sent)
            return self._delete(delivery, result)
        delay = delivery.lease.cap_visibility(exc.delay_seconds)
        delay, error = change_visibility(delivery, delay)
        result.fields["retry_in_seconds"] = delay
        self._failed(delivery, "ChangeMessageVisibility", error)
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
        """Delete the message; ``result`` if that worked, else ``delete_failed``."""
        error = delivery.delete(linger=self._delete_linger)
        if error is None:
            return result
        self._failed(delivery, "DeleteMessage", error)
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
            report_error(self._hooks, delivery.queue_name, exc, "settle")
            return None
        return self._delete(
            delivery,
            Settled(
                Outcome.DEAD_LETTERED, exception, fields={"dead_letter_queue": url}
            ),
        )
