"""How a job ended, said once: the ``job_finished`` line and hooks; retries' lines.

The settler decides a job's outcome (a :class:`Settled`); this module reports
it and touches nothing else: neither the message nor the :class:`Ran`. A
retry says when it comes back (``job_retrying``), a job out of attempts that
has no dead-letter queue says so (``retries_exhausted``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import typing as t

import structlog

from ..model import as_multi
from ..model import Hooks
from ..model import Outcome
from ..model import overrides
from ..model import RetryJob
from ..model import WorkerCounts
from ..sqs import format_utc
from ._ran import Ran
from ._settle_calls import is_last_receive

job_log = structlog.get_logger("flask_sqs_jobs.job")

_LEVELS = {
    Outcome.SUCCESS: "info",
    Outcome.DEFERRED: "info",
    Outcome.DUPLICATE: "info",
    Outcome.EXPIRED: "warning",
    Outcome.CANCELLED: "info",
    Outcome.LIMITED: "info",
    Outcome.RETRY: "warning",
}
#: Outcomes that leave the message in its queue: it comes back.
_LEFT_IN_QUEUE = frozenset(
    {Outcome.RETRY, Outcome.HEARTBEAT_FAILED, Outcome.DELETE_FAILED, Outcome.LIMITED}
)


@dataclasses.dataclass
class Settled:
    """What became of a job's message: the settle phase's own result.

    Built by the settler, read by :class:`Report`; the :class:`Ran` it came
    from is left as phase one built it.
    """

    outcome: Outcome
    exception: BaseException | None = None
    #: What the job had come to before a delete failed (``processing_outcome``).
    processing_outcome: Outcome | None = None
    #: Extra fields for the ``job_finished`` line.
    fields: dict[str, t.Any] = dataclasses.field(default_factory=dict)


def will_retry(ran: Ran, settled: Settled) -> bool:
    """Whether the job's message will come back to its queue.

    It does when it was left there (a retry, a lost lease, a failed delete),
    unless this was its last receive under a redrive policy: SQS then moves
    it to the dead-letter queue instead.
    """
    return settled.outcome in _LEFT_IN_QUEUE and not is_last_receive(ran.delivery)


class Report:
    """Say how each job ended: the ``job_finished`` log line, then the hooks.

    One per settler, called on the job's thread inside the job's scope, with
    no lock held. Whether any hook still implements the deprecated
    ``job_succeeded`` is looked up once, here.
    """

    def __init__(self, hooks: Hooks, counts: WorkerCounts) -> None:
        self._hooks = as_multi(hooks)
        self._counts = counts
        self._succeeded = overrides(self._hooks, "job_succeeded")

    def __call__(self, ran: Ran, settled: Settled) -> Outcome:
        """Report ``ran``'s job as ``settled``; return its outcome."""
        job = ran.job
        assert job is not None
        duration_ms = round((time.monotonic() - ran.started) * 1000, 2)
        outcome, exc = settled.outcome, settled.exception
        fields: dict[str, t.Any] = {
            "outcome": outcome.value,
            "duration_ms": duration_ms,
        }
        if settled.processing_outcome is not None:
            fields["processing_outcome"] = settled.processing_outcome.value
        handled = ran.handled
        if handled.idempotency is not None:
            fields["idempotency"] = handled.idempotency
        fields.update(settled.fields)
        if exc is not None and outcome is not Outcome.SUCCESS:
            fields["error_type"] = type(exc).__name__
            if not isinstance(exc, RetryJob):
                fields["exc_info"] = exc
        getattr(job_log, _LEVELS.get(outcome, "error"))("job_finished", **fields)
        self._counts.outcome(outcome)
        # MultiHooks: each hook isolated, so these never raise.
        hooks = self._hooks
        if outcome is Outcome.SUCCESS and self._succeeded:
            hooks.job_succeeded(job, handled.value)
        hooks.job_finished(
            job,
            outcome,
            duration_ms,
            exc,
            result=handled.value,
            will_retry=will_retry(ran, settled),
        )
        return outcome


def log_retrying(ran: Ran, retry_in_seconds: int | None) -> None:
    """Say that ``ran``'s job will run again, and when, if the worker set it.

    Without a delay (no retry policy or backoff) the message comes back when
    its visibility timeout ends, so only the attempt numbers are logged.
    """
    fields = _attempts(ran)
    if retry_in_seconds is not None:
        due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=retry_in_seconds)
        fields["retry_in_seconds"] = retry_in_seconds
        fields["next_attempt_at"] = format_utc(due)
    job_log.info("job_retrying", **fields)


def log_exhausted(ran: Ran, exception: BaseException | None) -> None:
    """Say that ``ran``'s job used its last attempt and, with no DLQ, is deleted."""
    job_log.error(
        "retries_exhausted",
        error_type=None if exception is None else type(exception).__name__,
        **_attempts(ran),
    )


def _attempts(ran: Ran) -> dict[str, t.Any]:
    """This attempt's number and how many the job gets, for a retry's line."""
    job = ran.job
    return {
        "attempt": ran.delivery.receive_count,
        "max_attempts": None if job is None else job.max_attempts,
    }
