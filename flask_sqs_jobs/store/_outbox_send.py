"""Send claimed outbox rows to SQS, then delete them or back them off.

Both the immediate send after a commit and the relay come through
:func:`send_claimed`, inside the transaction that holds the rows' locks: a
row is deleted in the same transaction that saw it sent, so a crash between
the send and the commit at worst sends it again, with the same job id.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

import sqlalchemy as sa
import structlog

from ..engine._batch_enqueue import _send_staged as send_staged
from ..engine._exceptions import UnknownQueueError
from ..engine._untrusted import loggable_text
from ..engine._wire import MAX_BATCH_ENTRIES
from . import _outbox_rows
from ._outbox_rows import OutboxRow

if t.TYPE_CHECKING:
    from ..engine._queue_group import QueueGroup

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")


@dataclasses.dataclass
class SendReport:
    """What one pass sent and what failed (row id -> (attempts so far, error))."""

    sent: list[int] = dataclasses.field(default_factory=list)
    failed: dict[int, tuple[int, str]] = dataclasses.field(default_factory=dict)

    @property
    def handled(self) -> int:
        return len(self.sent) + len(self.failed)


def send_claimed(
    connection: sa.Connection, group: QueueGroup, rows: list[OutboxRow], via: str
) -> SendReport:
    """Send ``rows`` (locked by ``connection``), delete the sent, back off the rest."""
    report = SendReport()
    by_queue: dict[str, list[OutboxRow]] = {}
    for row in rows:
        by_queue.setdefault(row.queue, []).append(row)
    for name, queue_rows in by_queue.items():
        try:
            _send_queue(group, name, queue_rows, report, via)
        except UnknownQueueError as exc:
            for row in queue_rows:
                report.failed[row.id] = (row.attempts, str(exc))
    _outbox_rows.delete(connection, report.sent)
    _outbox_rows.mark_failed(connection, report.failed)
    if report.failed:
        _log_failures(rows, report.failed, via)
    return report


def _send_queue(
    group: QueueGroup,
    name: str,
    rows: list[OutboxRow],
    report: SendReport,
    via: str,
) -> None:
    queue = group.queue(name)
    fifo = queue.is_fifo
    # On a FIFO queue a group that failed sends nothing more in this pass, so
    # its later rows never overtake the failed one.
    chunks: cabc.Iterable[list[OutboxRow]] = (
        [
            rows[i : i + MAX_BATCH_ENTRIES]
            for i in range(0, len(rows), MAX_BATCH_ENTRIES)
        ]
        if fifo
        else [rows]
    )
    failed_groups: set[str | None] = set()
    for chunk in chunks:
        todo = [r for r in chunk if not fifo or r.message_group_id not in failed_groups]
        if not todo:
            continue
        try:
            results = send_staged(queue, [r.send_params(fifo) for r in todo])
        except Exception as exc:
            results = [(type(exc).__name__, str(exc))] * len(todo)
        for row, result in zip(todo, results, strict=True):
            if isinstance(result, str):
                report.sent.append(row.id)
                job_log.info(
                    "job_enqueued",
                    queue=name,
                    job_type=loggable_text(row.job_type),
                    job_id=loggable_text(row.job_id),
                    message_id=result,
                    via=via,
                )
            else:
                report.failed[row.id] = (row.attempts, f"{result[0]}: {result[1]}")
                failed_groups.add(row.message_group_id)


def _log_failures(
    rows: list[OutboxRow], failed: dict[int, tuple[int, str]], via: str
) -> None:
    failing = [r for r in rows if r.id in failed]
    errors = sorted({failed[r.id][1] for r in failing})
    log.warning(
        "outbox_send_failed",
        via=via,
        count=len(failing),
        job_ids=[loggable_text(r.job_id) for r in failing[:20]],
        error=loggable_text("; ".join(errors)),
        retry_in_seconds=min(
            _outbox_rows.backoff_seconds(failed[r.id][0] + 1) for r in failing
        ),
    )
