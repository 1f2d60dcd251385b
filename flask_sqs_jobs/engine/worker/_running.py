"""Phase one of a job: read the message, enter the job's scope, run the handler.

The scope (the job's log context, its lease clock, the framework's job
context such as Flask's app context, ``current_job``, the job's runtime) is
entered here and stays open until the message is settled, so ``job_finished``
is reported inside it; the caller closes it with :meth:`Ran.close`.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import functools
import time

import structlog

from ..flow import CancelWatch
from ..flow import Tombstones
from ..model import as_multi
from ..model import call_handler
from ..model import compose_consume
from ..model import Hooks
from ..model import Job
from ..model import JobHandler
from ..model import JobMiddleware
from ..model import JobRuntime
from ..model import loggable_text
from ..model import max_attempts
from ..model import NonRetryableError
from ..model import Outcome
from ..model import overrides
from ..model import received_job_id
from ..model import report_error
from ..model import reset_current_job
from ..model import Retry
from ..model import runtime_limit
from ..model import set_current_job
from ..model import shown_job_id
from ..model import WorkerCounts
from ..sqs import decode_body
from ..sqs import DecodedBody
from ..sqs import fetch_job
from ..sqs import Pointer
from ._delivery import Delivery
from ._delivery import due_time
from ._delivery import expired_at
from ._heartbeat import Heartbeat
from ._idempotent_run import JobGuard
from ._ran import DELETED_OUTCOMES
from ._ran import HandlerResult
from ._ran import Kind
from ._ran import Ran
from ._ran import RETURNED
from ._received_job import job_of
from ._received_job import log_started

log = structlog.get_logger(__name__)


class JobRunner:
    """Turn a received message into a :class:`Ran`, running its handler.

    One per worker (and per eager queue group), shared by every slot thread:
    :meth:`run` is called on the job's own thread, without any lock held, in
    a context of its own. It keeps nothing between jobs; each job's runtime
    (session, progress sink, lease renewal) is created here, declared on the
    job, and closed with the job's scope. It calls the hooks ``job_context``,
    ``job_received`` and ``job_started``; the lease's clock is started and
    stopped through the heartbeat, its owner.

    :param handlers: job type -> handler.
    :param middleware: the queue group's middleware (its ``consume`` chains
        wrap each handler call).
    :param heartbeat: the worker's heartbeat, which owns the leases.
    :param hooks: the worker's hooks (a failing one is reported to all).
    :param guard: the job's session and idempotency key around the handler;
        by default no store (no sessions, no idempotent handlers).
    :param tombstones: the store's cancellations; None: no job is cancelled.
    """

    def __init__(
        self,
        handlers: cabc.Mapping[str, JobHandler],
        middleware: cabc.Sequence[JobMiddleware],
        heartbeat: Heartbeat,
        hooks: Hooks,
        guard: JobGuard | None = None,
        tombstones: Tombstones | None = None,
    ) -> None:
        self.handlers = handlers
        #: What the worker counts; the settler counts into the same.
        self.counts = WorkerCounts()
        self._middleware = tuple(middleware)
        self._heartbeat = heartbeat
        self._hooks = as_multi(hooks)
        self._guard = guard or JobGuard()
        self._records_progress = overrides(self._hooks, "job_progress")
        self._cancels = CancelWatch(
            tombstones, lambda e, queue: report_error(self._hooks, queue, e, "store")
        )

    def run(self, delivery: Delivery) -> Ran:
        """Run phase one; never raises ``Exception``.

        Call it in a context of its own (``contextvars.copy_context().run``):
        it binds the job's log fields there.
        """
        started = time.monotonic()
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
                return Ran(delivery, Kind.MALFORMED, scope, started, reason=found)
            if found is not None:
                try:
                    body, pointer = fetch_job(large, found), found
                except Exception as exc:
                    unread = HandlerResult(Outcome.RETRY, exc)
                    return Ran(
                        delivery,
                        Kind.UNFETCHED,
                        scope,
                        started,
                        None,
                        unread,
                        pointer=found,
                    )
        return self._run_body(delivery, scope, started, body, pointer)

    def _run_body(
        self,
        delivery: Delivery,
        scope: contextlib.ExitStack,
        started: float,
        body: object,
        pointer: Pointer | None,
    ) -> Ran:
        """Decode ``body`` and run the job it holds, if it is one of ours now.

        A body that is no job is malformed; a job type without a handler is
        unknown; a job past its ``expires_at``, or cancelled, is deleted
        unrun; a job whose ``run_at`` is ahead is deferred (received, but not
        started); any other job runs its handler.
        """
        decoded = body if isinstance(body, DecodedBody) else decode_body(body)
        if isinstance(decoded, str):
            return Ran(
                delivery,
                Kind.MALFORMED,
                scope,
                started,
                reason=decoded,
                pointer=pointer,
            )
        job_id, invalid = received_job_id(decoded.job_id, delivery.message_id)
        structlog.contextvars.bind_contextvars(
            job_id=job_id, job_type=loggable_text(decoded.job_type)
        )
        if invalid:
            log.warning("job_id_invalid", sent_job_id=shown_job_id(decoded.job_id))
            self.counts.malformed(delivery.queue_name, "bad_job_id")
        handler = self.handlers.get(decoded.job_type)
        if handler is None:
            return Ran(delivery, Kind.UNKNOWN, scope, started, pointer=pointer)
        job = job_of(delivery, decoded, job_id)
        redrive = delivery.queue.redrive_policy()
        receives = None if redrive is None else redrive[1]
        job.max_attempts = max_attempts(handler.retry, receives)
        expires_at = expired_at(decoded)
        unrun = Kind.EXPIRED if expires_at is not None else None
        if unrun is None and self._cancels.arrived(job):
            unrun = Kind.CANCELLED
        run_at = None if unrun is not None else due_time(decoded, delivery)
        if unrun is not None or run_at is not None:
            handled = self._enter_job_context(job, scope)
            return Ran(
                delivery,
                unrun or Kind.DEFERRED,
                scope,
                started,
                job,
                handled or RETURNED,
                run_at=run_at or expires_at,
                pointer=pointer,
            )
        handled, retry = self._run_handler(job, scope, delivery, handler)
        return Ran(
            delivery,
            Kind.JOB,
            scope,
            started,
            job,
            handled,
            pointer=pointer,
            retry=retry,
        )

    def _enter_job_context(
        self, job: Job, scope: contextlib.ExitStack
    ) -> HandlerResult | None:
        """Enter the hooks' job context, then say ``job_received``.

        Returns the result of a job whose context could not be entered (a
        retry), None once it is entered.
        """
        failed = None
        try:
            scope.enter_context(self._hooks.job_context(job))
        except Exception as exc:
            log.exception("job_context_failed")
            report_error(self._hooks, job.queue, exc, "hook")
            failed = HandlerResult(Outcome.RETRY, exc)
        self._hooks.job_received(job)  # MultiHooks: isolated, never raises
        return failed

    def _run_handler(
        self,
        job: Job,
        scope: contextlib.ExitStack,
        delivery: Delivery,
        handler: JobHandler,
    ) -> tuple[HandlerResult, Retry | None]:
        """Run the handler under its lease's clock; return its result and policy.

        The job's runtime is created and declared on the job first; the
        lease's clock starts before the job's context is entered, so a slow
        context counts against the job's runtime. Once the handler returned,
        a message about to be deleted stays extended until its delete is
        done (``freeze``); any other is dropped from the heartbeat, so the
        settler may set its visibility.
        """
        lease = delivery.lease
        progress = (
            functools.partial(self._hooks.job_progress, job)
            if self._records_progress
            else None
        )
        runtime = JobRuntime(self._guard.session(), progress)
        job._runtime = runtime
        limit = runtime_limit(
            handler.max_runtime_seconds,
            delivery.queue.max_runtime_seconds,
            job.max_runtime_seconds,
        )
        if delivery.runtime_cap is not None:
            limit = min(limit, delivery.runtime_cap)
        self._heartbeat.start_job(lease, limit, job.abort_requested, runtime)
        failed = self._enter_job_context(job, scope)
        if failed is not None:
            self._heartbeat.drop(lease)
            return failed, None
        scope.callback(runtime.close)

        def report(error: BaseException) -> None:
            report_error(self._hooks, job.queue, error, "store")

        try:
            with self._cancels.watching(job, lease.interval):
                handled = self._guard.run(
                    job,
                    delivery,
                    runtime,
                    handler,
                    lambda: self._call(job, delivery, handler),
                    report,
                )
        except BaseException as error:
            # SystemExit or KeyboardInterrupt from the handler: the message
            # is left for redelivery and the error goes on up.
            self._heartbeat.drop(lease)
            scope.__exit__(type(error), error, error.__traceback__)
            raise
        if lease.tracked and handled.outcome in DELETED_OUTCOMES:
            # Still extended while the delete waits and travels: it must not
            # outlive the visibility timeout and let the job run twice.
            self._heartbeat.freeze(lease)
        else:
            self._heartbeat.drop(lease)
        return handled, handler.retry

    def _call(self, job: Job, delivery: Delivery, handler: JobHandler) -> HandlerResult:
        """Call the handler through ``consume`` middleware, as ``current_job``;
        its value is kept on the job's runtime (middleware reads it there)."""
        runtime = job._runtime or JobRuntime(self._guard.session(), None)

        def start_and_call(job: Job) -> None:
            log_started(delivery)
            self._hooks.job_started(job)
            runtime.result = call_handler(handler.func, job.payload)

        token = set_current_job(job)
        try:
            compose_consume(self._middleware, start_and_call)(job)
        except NonRetryableError as exc:
            return HandlerResult(Outcome.DELETE, exc)
        except Exception as exc:
            return HandlerResult(Outcome.RETRY, exc)
        finally:
            reset_current_job(token)
        return HandlerResult(Outcome.SUCCESS, None, runtime.result)
