"""Run a handler inside its job's session and, if idempotent, its key.

Before an idempotent handler runs, its key is claimed with a lease as long as
what is left of the message's visibility; the heartbeat renews it with every
extension. A completed key makes the job a ``duplicate``; a key held by a live
lease elsewhere makes it a ``retry`` that comes back when that lease ends; a
key used for another payload is an :class:`IdempotencyConflictError`. On
success the completion is written in the job's session (if the handler opened
it) and committed with the handler's writes; when the handler raises, or that
commit fails, the key is relinquished so the retry runs. Every failed call
on the store is reported to the hooks (``worker_error``, kind ``"store"``).
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import math
import typing as t

import structlog

from ..flow import check_limits
from ..flow import JobLimited
from ..flow import LimitGate
from ..flow import LimitStore
from ..model import ClaimState
from ..model import fingerprint_of
from ..model import IdempotencyConflictError
from ..model import IdempotencyKeys
from ..model import Job
from ..model import JobHandler
from ..model import JobRuntime
from ..model import JobSession
from ..model import key_of
from ..model import loggable_text
from ..model import MAX_RESULT_BYTES
from ..model import NonRetryableError
from ..model import Outcome
from ..model import RetryJob
from ..model import runtime_limit
from ..model import SessionFactory
from ..model import stored_key
from ..sqs import result_json
from ..sqs import ResultNotKept
from ._delivery import Delivery
from ._ran import HandlerResult

log = structlog.get_logger(__name__)

#: Reports a failed call on the store (to ``worker_error``, kind ``"store"``).
StoreErrors: t.TypeAlias = cabc.Callable[[BaseException], None]


class IdempotencyKeyInProgress(RetryJob):
    """The job's key is held by a live lease elsewhere: try when it ends."""

    def __init__(self, delay_seconds: int, holder_job_id: str | None) -> None:
        super().__init__(delay_seconds)
        #: The job that holds the key.
        self.holder_job_id = holder_job_id


@dataclasses.dataclass
class _Held:
    """A key this job holds while its handler runs."""

    keys: IdempotencyKeys
    key: str
    token: str
    report: StoreErrors
    #: Set once the handler is done: a renewal refused then is expected.
    done: bool = False

    def renew(self, seconds: int) -> None:
        """Extend the key's lease with the message's (on the heartbeat's pool)."""
        try:
            renewed = self.keys.renew(self.key, self.token, seconds)
        except Exception as exc:
            log.warning("idempotency_renew_failed", error=_shown(exc))
            self.report(exc)
            return
        if not renewed and not self.done:
            log.warning(
                "idempotency_renew_failed",
                error="the key is no longer held by this job",
            )

    def relinquish(self) -> None:
        """Give the key up, so that the job's retry may claim it at once."""
        try:
            self.keys.relinquish(self.key, self.token)
        except Exception as exc:
            # Its lease still ends on its own, and then the retry claims it.
            log.warning("idempotency_release_failed", error=_shown(exc))
            self.report(exc)


class JobGuard:
    """Wrap each handler call in its job's session and idempotency key.

    Created once per worker (or eager queue group) from the store's keys and
    session factory; called by the job runner on the job's own thread, inside
    the job's scope, never with a lock held. What it remembers across jobs
    (the job types whose results it could not keep) is guarded by the GIL:
    a set only ever added to.

    :param keys: the store's idempotency keys; None without a store.
    :param session_factory: opens a job's session (``current_job.session``).
    :param limits: the store's limits (None: limits are not applied, eager mode).
    """

    def __init__(
        self,
        keys: IdempotencyKeys | None = None,
        session_factory: SessionFactory | None = None,
        limits: LimitStore | None = None,
    ) -> None:
        self._keys = keys
        self._session_factory = session_factory
        self._gate = None if limits is None else LimitGate(limits)
        self._unkept_results: set[str] = set()

    @classmethod
    def for_handlers(
        cls,
        handlers: cabc.Mapping[str, JobHandler],
        keys: IdempotencyKeys | None,
        session_factory: SessionFactory | None,
        limits: LimitStore | None = None,
    ) -> JobGuard:
        """A guard for ``handlers``; refuses idempotent or limited ones storeless."""
        limited = sorted(n for n, h in handlers.items() if h.limits)
        for name in limited:
            check_limits(f"the handler of {name!r}", handlers[name].limits)
        if limits is None and limited:
            raise ValueError(
                f"handlers with limits ({', '.join(map(repr, limited))}) need a job"
                " store (SQS_JOBS_STORE_URL), or JobWorker(limit_store=store.limits())"
            )
        if keys is None:
            idempotent = sorted(n for n, h in handlers.items() if h.idempotent)
            if idempotent:
                raise ValueError(
                    f"idempotent handlers ({', '.join(map(repr, idempotent))}) need"
                    " a job store's idempotency keys: configure a store"
                    " (SQS_JOBS_STORE_URL) or pass"
                    " JobWorker(idempotency_keys=store.idempotency_keys())"
                )
        return cls(keys, session_factory, limits)

    def session(self) -> JobSession:
        """A new job's session (opened when the handler first asks for it)."""
        return JobSession(self._session_factory)

    def run(
        self,
        job: Job,
        delivery: Delivery,
        runtime: JobRuntime,
        handler: JobHandler,
        call: cabc.Callable[[], HandlerResult],
        report: StoreErrors,
    ) -> HandlerResult:
        """Call the handler through ``call``; return what came of it.

        The handler's limits are taken first (``limited`` when one refuses;
        the permits are renewed through ``runtime`` and returned once the
        handler is done). An idempotent handler's key is claimed next (its
        lease renewed likewise), completed in the job's session on success,
        and relinquished when the handler fails.
        """
        if handler.limits and self._gate is not None:
            lease = _lease_seconds(delivery, handler, job)
            permits = self._gate.enter(job, handler.limits, lease, report)
            if isinstance(permits, Exception):
                limited = isinstance(permits, JobLimited)
                outcome = Outcome.LIMITED if limited else Outcome.RETRY
                return HandlerResult(outcome, permits)
            runtime.hold_permits(permits.renew, permits.release)
        session = runtime.session
        held = None
        if handler.idempotent:
            claimed = self._claim(job, delivery, handler, report)
            if not isinstance(claimed, _Held):
                return claimed
            held = claimed
            runtime.renew_with(held.renew)
        try:
            handled = call()
        except BaseException:
            self._handler_done(runtime, session, held, failed=True)
            raise
        if handled.succeeded:
            error = self._commit(job, handler, session, held, handled.value)
            if error is not None:
                report(error)
                handled = HandlerResult(Outcome.RETRY, error)
            elif held is not None:
                runtime.key_completed = True
        self._handler_done(runtime, session, held, failed=not handled.succeeded)
        if held is None:
            return handled
        return dataclasses.replace(handled, idempotency=ClaimState.CLAIMED.value)

    def _claim(
        self, job: Job, delivery: Delivery, handler: JobHandler, report: StoreErrors
    ) -> _Held | HandlerResult:
        """Claim the job's key: held, or what comes of the job without its handler.

        A completed key makes a duplicate (with the kept result), one held
        elsewhere a retry when its lease ends, one used with another payload
        a conflict; a store that fails makes a retry.
        """
        if self._keys is None:
            # JobWorker refuses idempotent handlers without keys; never run unguarded.
            return HandlerResult(Outcome.RETRY, RuntimeError("no idempotency keys"))
        try:
            key = key_of(job, handler)
            stored = stored_key(job.job_type, key, handler.idempotency_scope)
            payload_hash = fingerprint_of(job, handler)
        except NonRetryableError as exc:
            return HandlerResult(Outcome.DELETE, exc)
        try:
            claim = self._keys.claim(
                stored,
                payload_hash=payload_hash,
                job_id=job.job_id or delivery.message_id,
                lease_seconds=_lease_seconds(delivery, handler, job),
            )
        except Exception as exc:
            log.warning("idempotency_claim_failed", error=_shown(exc))
            report(exc)
            return HandlerResult(Outcome.RETRY, exc)
        state = claim.state.value
        if claim.state is ClaimState.CLAIMED:
            assert claim.token is not None
            return _Held(self._keys, stored, claim.token, report)
        if job._runtime is not None:
            job._runtime.key_holder = claim.holder_job_id
        if claim.state is ClaimState.COMPLETED:
            return HandlerResult(Outcome.DUPLICATE, None, claim.result, state)
        if claim.state is ClaimState.IN_PROGRESS:
            wait = claim.retry_after_seconds or 1
            delay = min(43_200, max(1, math.ceil(wait)))
            in_progress = IdempotencyKeyInProgress(delay, claim.holder_job_id)
            return HandlerResult(Outcome.RETRY, in_progress, None, state)
        conflict = IdempotencyConflictError(key, claim.holder_job_id)
        return HandlerResult(Outcome.DELETE, conflict, None, state)

    def _commit(
        self,
        job: Job,
        handler: JobHandler,
        session: JobSession,
        held: _Held | None,
        result: object,
    ) -> Exception | None:
        """Complete the key and commit the job's session; return what failed."""
        opened = session.opened
        try:
            if held is not None:
                held.keys.complete(
                    held.key,
                    held.token,
                    result=self._keepable(job.job_type, result),
                    ttl_seconds=handler.idempotency_ttl_seconds,
                    session=opened,
                )
            if opened is not None:
                opened.commit()
        except Exception as exc:
            log.warning("job_commit_failed", error=_shown(exc))
            return exc
        return None

    def _handler_done(
        self,
        runtime: JobRuntime,
        session: JobSession,
        held: _Held | None,
        *,
        failed: bool,
    ) -> None:
        """The handler is done: roll a failed job's session back, return its
        permits, stop renewing its key, and relinquish the key if the job failed."""
        if failed and session.opened is not None:
            # Before relinquishing: on SQLite the session's write lock would
            # hold the key's update back until the job's scope closes.
            _rollback(session.opened)
        runtime.release_permits()
        if held is None:
            return
        held.done = True
        runtime.renew_with(None)
        if failed:
            held.relinquish()

    def _keepable(self, job_type: str, result: object) -> object:
        """``result`` if a store can keep it (:func:`result_json`), else None (said
        once per job type)."""
        if result is None:
            return None
        try:
            result_json(result)
        except ResultNotKept as exc:
            if job_type not in self._unkept_results:
                self._unkept_results.add(job_type)
                log.warning(
                    "idempotency_result_not_kept",
                    reason=f"{exc.size} bytes" if exc.size is not None else exc.kind,
                    max_result_bytes=MAX_RESULT_BYTES,
                )
            return None
        return result


def _lease_seconds(delivery: Delivery, handler: JobHandler, job: Job) -> float:
    """What is left of the message's visibility (the runtime limit without one)."""
    lease = delivery.lease
    if lease.tracked:
        return max(1.0, lease.visibility_left())
    return runtime_limit(
        handler.max_runtime_seconds,
        delivery.queue.max_runtime_seconds,
        job.max_runtime_seconds,
    )


def _rollback(session: t.Any) -> None:
    """Roll the job's session back; a failure is logged (the close rolls back too)."""
    try:
        session.rollback()
    except Exception as exc:
        log.warning("job_rollback_failed", error=_shown(exc))


def _shown(exc: BaseException) -> str:
    """A store's error for a log line: it may quote the key, which is untrusted."""
    return loggable_text(str(exc), 1000)
