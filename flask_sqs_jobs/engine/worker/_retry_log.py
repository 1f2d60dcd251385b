"""The log lines of retries: ``job_retrying`` and ``retries_exhausted``."""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog

from ..sqs import format_utc
from ._ran import Ran

job_log = structlog.get_logger("flask_sqs_jobs.job")


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
