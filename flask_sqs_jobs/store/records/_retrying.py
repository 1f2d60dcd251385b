"""Running failed jobs again from their records: the same job id, a new attempt.

A ``failed`` or ``dead_lettered`` record that kept its payload
(``SQS_JOBS_RECORD_FAILED_PAYLOADS``) is enqueued again through the queue
group (the one produce pipeline: middleware, checks, sinks), with its job id,
job type, queue and tags; the record then says ``queued`` (attempts 0) until
a worker's ``running`` starts the new attempt. A dead-lettered job's letter
stays in the dead-letter queue: a later redrive of it runs the job once more.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

from ...engine.model import UnknownQueueError
from .. import model as r

if t.TYPE_CHECKING:
    from ...engine import QueueGroup

#: The statuses whose records can be run again.
RETRYABLE = frozenset({r.FAILED, r.DEAD_LETTERED})


@dataclasses.dataclass(frozen=True)
class RetryReport:
    """What a retry did: the job ids sent again, and those not sent, with why."""

    sent: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, t.Any]:
        return dataclasses.asdict(self)


def why_not_retryable(record: r.JobRecord) -> str | None:
    """Why ``record`` cannot be run again, or None when it can."""
    if record.status not in RETRYABLE:
        return f"it is {record.status}, not failed or dead_lettered"
    if record.payload is None:
        return (
            "its payload was not kept (SQS_JOBS_RECORD_FAILED_PAYLOADS, or too large)"
        )
    return None


def retry_records(
    store: r.JobStore, group: QueueGroup, records: t.Iterable[r.JobRecord]
) -> RetryReport:
    """Enqueue each retryable record's job again; report what was sent.

    :raises: what the enqueue raises (an SQS error): the jobs before it were sent.
    """
    report = RetryReport()
    for record in records:
        problem = why_not_retryable(record)
        if problem is not None:
            report.skipped[record.job_id] = problem
            continue
        try:
            group.enqueue(
                record.queue,
                record.job_type,
                record.payload,
                job_id=record.job_id,
                tags=list(record.tags) or None,
            )
        except UnknownQueueError:
            report.skipped[record.job_id] = f"its queue {record.queue!r} is not here"
            continue
        now = dt.datetime.now(dt.UTC)
        # Over the finished record (a restart), unless a worker's run came first.
        store.job_records().write(
            [
                r.JobEvent(
                    record.job_id,
                    record.job_type,
                    record.queue,
                    r.QUEUED,
                    0,
                    now,
                    enqueued_at=now,
                    tags=record.tags,
                    restarted=True,
                )
            ]
        )
        report.sent.append(record.job_id)
    return report
