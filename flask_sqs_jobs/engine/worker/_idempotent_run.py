"""Run a handler inside its job's session and, if idempotent, its key.

Before an idempotent handler runs, its key is claimed with a lease as long as
what is left of the message's visibility; the heartbeat renews it with every
extension. A completed key makes the job a ``duplicate``; a key held by a live
lease elsewhere makes it a ``retry`` that comes back when that lease ends; a
key used for another payload is an :class:`IdempotencyConflictError`. On
success the completion is written in the job's session (if the handler opened
it) and committed with the handler's writes; when the handler raises, or that
commit fails, the key is released so the retry runs.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import hashlib
import math
import typing as t
import urllib.parse

import structlog

from ..model import ClaimState
from ..model import GLOBAL_SCOPE
from ..model import IdempotencyConflictError
from ..model import IdempotencyKeys
from ..model import Job
from ..model import JobHandler
from ..model import JobSession
from ..model import loggable_text
from ..model import MAX_RESULT_BYTES
from ..model import NonRetryableError
from ..model import Outcome
from ..model import payload_fingerprint
from ..model import RetryJob
from ..model import SessionFactory
from ..sqs import result_json
from ..sqs import ResultNotKept
from ._delivery import Delivery

if t.TYPE_CHECKING:
    from ._running import Ran

log = structlog.get_logger(__name__)

#: The longest key a key function may return (the key column's width).
MAX_KEY_LENGTH = 255

#: The handler's verdict: outcome, exception, return value.
Verdict: t.TypeAlias = tuple[Outcome, BaseException | None, object]


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
    #: Set once the handler is done: a renewal refused then is expected.
    done: bool = False

    def renew(self, seconds: int) -> None:
        try:
            renewed = self.keys.renew(self.key, self.token, seconds)
        except Exception as exc:
            log.warning("idempotency_renew_failed", error=_shown(exc))
            return
        if not renewed and not self.done:
            log.warning(
                "idempotency_renew_failed",
                error="the key is no longer held by this job",
            )

    def release(self) -> None:
        try:
            self.keys.release(self.key, self.token)
        except Exception as exc:
            # Its lease still ends on its own, and then the retry claims it.
            log.warning("idempotency_release_failed", error=_shown(exc))


class JobGuard:
    """Wrap each handler call in its job's session and idempotency key."""

    def __init__(
        self,
        keys: IdempotencyKeys | None = None,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self._keys = keys
        self._session_factory = session_factory
        self._unkept_results: set[str] = set()

    @classmethod
    def for_handlers(
        cls,
        handlers: cabc.Mapping[str, JobHandler],
        keys: IdempotencyKeys | None,
        session_factory: SessionFactory | None,
    ) -> JobGuard:
        """A guard for ``handlers``; refuses idempotent ones without keys."""
        if keys is None:
            idempotent = sorted(n for n, h in handlers.items() if h.idempotent)
            if idempotent:
                raise ValueError(
                    f"idempotent handlers ({', '.join(map(repr, idempotent))}) need"
                    " a job store's idempotency keys: configure a store"
                    " (SQS_JOBS_STORE_URL) or pass"
                    " JobWorker(idempotency_keys=store.idempotency_keys())"
                )
        return cls(keys, session_factory)

    def run(
        self, ran: Ran, handler: JobHandler, call: cabc.Callable[[], Verdict]
    ) -> None:
        """Call the handler through ``call`` and set ``ran``'s verdict."""
        job = t.cast(Job, ran.job)
        session = JobSession(self._session_factory)
        job._session = session
        ran.scope.callback(session.close)
        held = None
        if handler.idempotent:
            claimed = self._claim(ran, handler)
            if not isinstance(claimed, _Held):
                ran.outcome, ran.exception, ran.result = claimed
                return
            held = claimed
            ran.delivery.lease.on_extended = held.renew
        try:
            outcome, exception, result = call()
        except BaseException:
            self._handler_done(ran.delivery, session, held, failed=True)
            raise
        if outcome is Outcome.SUCCESS:
            error = self._commit(job, handler, session, held, result)
            if error is not None:
                outcome, exception, result = Outcome.RETRY, error, None
        failed = outcome is not Outcome.SUCCESS
        self._handler_done(ran.delivery, session, held, failed=failed)
        ran.outcome, ran.exception, ran.result = outcome, exception, result

    def _claim(self, ran: Ran, handler: JobHandler) -> _Held | Verdict:
        job, delivery = t.cast(Job, ran.job), ran.delivery
        if self._keys is None:
            # JobWorker refuses idempotent handlers without keys; never run unguarded.
            return Outcome.RETRY, RuntimeError("no idempotency keys"), None
        try:
            key = key_of(job, handler)
            stored = stored_key(job.job_type, key, handler.idempotency_scope)
            payload_hash = _fingerprint(job, handler)
        except NonRetryableError as exc:
            return Outcome.DELETE, exc, None
        try:
            claim = self._keys.claim(
                stored,
                payload_hash=payload_hash,
                job_id=job.job_id or delivery.message_id,
                lease_seconds=_lease_seconds(delivery, handler),
            )
        except Exception as exc:
            log.warning("idempotency_claim_failed", error=_shown(exc))
            return Outcome.RETRY, exc, None
        ran.fields["idempotency"] = claim.state.value
        if claim.state is ClaimState.CLAIMED:
            assert claim.token is not None
            return _Held(self._keys, stored, claim.token)
        job._key_holder = claim.holder_job_id
        if claim.state is ClaimState.COMPLETED:
            return Outcome.DUPLICATE, None, claim.result
        if claim.state is ClaimState.IN_PROGRESS:
            wait = claim.retry_after_seconds or 1
            delay = min(43_200, max(1, math.ceil(wait)))
            in_progress = IdempotencyKeyInProgress(delay, claim.holder_job_id)
            return Outcome.RETRY, in_progress, None
        return Outcome.DELETE, IdempotencyConflictError(key, claim.holder_job_id), None

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
        delivery: Delivery,
        session: JobSession,
        held: _Held | None,
        *,
        failed: bool,
    ) -> None:
        if failed and session.opened is not None:
            # Before the release: on SQLite the session's write lock would
            # hold the release back until the job's scope closes.
            _rollback(session.opened)
        if held is None:
            return
        held.done = True
        delivery.lease.on_extended = None
        if failed:
            held.release()

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


def key_of(job: Job, handler: JobHandler) -> str:
    """The job's idempotency key: the key function's, or its job id."""
    if handler.idempotency_key is None:
        return t.cast(str, job.job_id)
    try:
        key = handler.idempotency_key(job.payload)
    except Exception as exc:
        raise NonRetryableError(
            f"the idempotency_key function of job type {job.job_type!r} raised"
            f" {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH:
        shown = repr(key)[:80]
        raise NonRetryableError(
            f"the idempotency_key function of job type {job.job_type!r} returned"
            f" {shown}; it must return a non-empty str of at most"
            f" {MAX_KEY_LENGTH} characters"
        )
    return key


def stored_key(job_type: str, key: str, scope: str) -> str:
    """The key as stored: ``<job type>:<key>``, or ``:<key>`` in the global scope.

    The job type is percent-encoded (so it holds no ``:`` and one job type's
    keys never meet another's); a stored key over :data:`MAX_KEY_LENGTH`
    characters becomes ``#`` and the SHA-256 of it, which no other stored key
    starts with.
    """
    namespace = (
        ""
        if scope == GLOBAL_SCOPE
        else urllib.parse.quote(job_type, safe="", errors="surrogatepass")
    )
    stored = f"{namespace}:{key}"
    if len(stored) <= MAX_KEY_LENGTH:
        return stored
    digest = hashlib.sha256(stored.encode("utf-8", "surrogatepass")).hexdigest()
    return f"#{digest}"


def _fingerprint(job: Job, handler: JobHandler) -> str:
    """The payload's hash, with the job type unless the key is shared on purpose."""
    job_type = None if handler.idempotency_scope == GLOBAL_SCOPE else job.job_type
    try:
        return payload_fingerprint(job.payload, job_type)
    except (RecursionError, TypeError, ValueError) as exc:
        # Unreachable for a decoded body (it is bounded); never a store failure.
        raise NonRetryableError(
            f"the payload of job type {job.job_type!r} cannot be hashed for its"
            f" idempotency key: {type(exc).__name__}"
        ) from exc


def _lease_seconds(delivery: Delivery, handler: JobHandler) -> float:
    """What is left of the message's visibility (the runtime limit without one)."""
    lease = delivery.lease
    if lease.tracked:
        return max(1.0, lease.visibility_left())
    return handler.max_runtime_seconds or delivery.queue.max_runtime_seconds


def _rollback(session: t.Any) -> None:
    try:
        session.rollback()
    except Exception as exc:
        log.warning("job_rollback_failed", error=_shown(exc))


def _shown(exc: BaseException) -> str:
    """A store's error for a log line: it may quote the key, which is untrusted."""
    return loggable_text(str(exc), 1000)
