"""A workflow job's final outcome, recorded before its message is settled.

:class:`WorkflowMiddleware` is the innermost ``consume`` middleware of an
app with a SQL store. Around a batch child or a chain step (its correlation
fields name the batch or chain) it records how the handler ended once that
end is final: a success, or a failure no retry follows (non-retryable, the
retry policy's verdict, or the job's last attempt, which is dead-lettered).
The record, the batch's counts or the chain's move, and the outbox rows of
what that makes due commit in one transaction, before the settler deletes
the message: a worker killed after it leaves a message that runs again and
counts nothing twice. A failed record write fails the attempt, so the job
comes back and the write is tried again.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import structlog

from ..engine.model import Hooks
from ..engine.model import Job
from ..engine.model import JobMiddleware
from ..engine.model import judge
from ..engine.model import MultiHooks
from ..engine.model import NonRetryableError
from ..engine.model import Outcome
from ..engine.model import Verdict
from ._signature import BATCH_FIELD
from ._signature import CHAIN_FIELD
from ._signature import STEP_FIELD

log = structlog.get_logger(__name__)

#: A failed child's or step's error is kept to this many characters.
MAX_ERROR_CHARS = 2000


class WorkflowMiddleware(JobMiddleware):
    """Record batch children's and chain steps' final outcomes (see the module).

    :param jobs: the ``SQSJobs`` whose store, handlers and enqueue it uses,
        inside the job's app context.
    """

    def __init__(self, jobs: t.Any) -> None:
        self._jobs = jobs

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        fields = job.correlation_fields
        batch_id, chain_id = fields.get(BATCH_FIELD), fields.get(CHAIN_FIELD)
        if not isinstance(batch_id, str):
            batch_id = None
        if not isinstance(chain_id, str):
            chain_id = None
        if (batch_id is None and chain_id is None) or not self._has_sql_store():
            call_next(job)
            return
        if batch_id is not None and job._runtime is not None:
            from ._counting import RunningBatch

            job._runtime.batch = RunningBatch(self._jobs, batch_id)
        try:
            call_next(job)
        except Exception as exc:
            if self._final(job, exc):
                try:
                    self._record(job, batch_id, chain_id, None, _error_text(exc))
                except Exception:
                    # The attempt fails anyway; its own error is the one kept.
                    log.exception("workflow_record_failed", job_id=job.job_id)
            raise
        runtime = job._runtime
        self._record(job, batch_id, chain_id, getattr(runtime, "result", None), None)

    def record_unrun(self, job: Job, outcome: Outcome) -> None:
        """A child or step deleted unrun (expired, cancelled) fails for good."""
        fields = job.correlation_fields
        batch_id, chain_id = fields.get(BATCH_FIELD), fields.get(CHAIN_FIELD)
        if (isinstance(batch_id, str) or isinstance(chain_id, str)) and (
            self._has_sql_store()
        ):
            self._record(
                job,
                batch_id if isinstance(batch_id, str) else None,
                chain_id if isinstance(chain_id, str) else None,
                None,
                f"{outcome.value}: deleted unrun",
            )

    def _has_sql_store(self) -> bool:
        from ..store.sql import SQLAlchemyStore

        return isinstance(self._jobs.parts().store, SQLAlchemyStore)

    def _final(self, job: Job, exc: BaseException) -> bool:
        """Whether no retry follows this failed attempt."""
        if isinstance(exc, NonRetryableError):
            return True
        attempt = job.receive_count or 1
        if job.max_attempts is not None and attempt >= job.max_attempts:
            return True
        handler = self._jobs.handlers.get(job.job_type)
        policy = None if handler is None else handler.retry
        return policy is not None and judge(policy, attempt, exc) is not Verdict.RETRY

    def _record(
        self,
        job: Job,
        batch_id: str | None,
        chain_id: str | None,
        result: object,
        error: str | None,
    ) -> None:
        """Write the outcome and what it makes due, in one committed transaction."""
        from ._chains import record_step
        from ._counting import record_child
        from ._counting import send_due

        assert job.job_id is not None
        succeeded = error is None
        store = self._jobs.parts().outbox_store()
        with store.session() as session:
            if batch_id is not None:
                due = record_child(session, batch_id, job.job_id, succeeded, error)
                send_due(self._jobs, session, batch_id, due)
            step = job.correlation_fields.get(STEP_FIELD)
            if chain_id is not None and isinstance(step, int):
                record_step(
                    self._jobs,
                    session,
                    chain_id,
                    step,
                    job.job_id,
                    succeeded=succeeded,
                    result=result,
                    error=error,
                )
            session.commit()


class WorkflowHooks(Hooks):
    """Children and steps that never ran count as failed: those ``expired``, and
    those ``cancelled`` before they started (one cancelled while it ran was
    recorded by the middleware already, and counts once)."""

    def __init__(self, middleware: WorkflowMiddleware) -> None:
        self._middleware = middleware

    def job_finished(  # type: ignore[override]  # takes none of the new arguments
        self, job: Job, outcome: Outcome, *args: object
    ) -> None:
        if outcome in (Outcome.EXPIRED, Outcome.CANCELLED):
            self._middleware.record_unrun(job, outcome)


def with_workflows(
    jobs: t.Any, middleware: cabc.Sequence[JobMiddleware], hooks: Hooks
) -> tuple[tuple[JobMiddleware, ...], Hooks]:
    """An app's middleware and hooks with the workflows' (its middleware innermost)."""
    recorder = WorkflowMiddleware(jobs)
    return (*middleware, recorder), MultiHooks([hooks, WorkflowHooks(recorder)])


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
