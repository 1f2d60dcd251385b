"""Send claimed outbox rows to SQS, then delete them or back them off.

Both the immediate send after a commit and the relay come through
:func:`send_claimed`, inside the transaction that holds the rows' locks: a
row is deleted in the same transaction that saw it sent, so a crash between
the send and the commit at worst sends it again, with the same job id.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import typing as t

import sqlalchemy as sa
import structlog

from ...engine.model import loggable_text
from ...engine.model import MAX_BATCH_ENTRIES
from ...engine.model import UnknownQueueError
from ...engine.producing import report_enqueued
from ...engine.producing import send_staged as send_staged
from . import _rows as _outbox_rows
from ._rows import OutboxRow

if t.TYPE_CHECKING:
    from ...engine import QueueGroup
    from ...engine.sqs import SqsQueue

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")

#: SendMessageBatch requests in flight at once for a standard queue.
_PARALLEL_REQUESTS = 4


@dataclasses.dataclass
class SendReport:
    """What one pass sent and what failed (row id -> (attempts so far, error))."""

    sent: list[int] = dataclasses.field(default_factory=list)
    #: row id -> the MessageId SQS gave it.
    message_ids: dict[int, str] = dataclasses.field(default_factory=dict)
    failed: dict[int, tuple[int, str]] = dataclasses.field(default_factory=dict)

    @property
    def handled(self) -> int:
        return len(self.sent) + len(self.failed)


def send_claimed(
    connection: sa.Connection, group: QueueGroup, rows: list[OutboxRow], via: str
) -> SendReport:
    """Send ``rows`` (locked by ``connection``), delete the sent, back off the rest."""
    report = send_rows(group, rows, via)
    settle(connection, rows, report, via)
    return report


def send_rows(group: QueueGroup, rows: list[OutboxRow], via: str) -> SendReport:
    """Send ``rows`` to their queues; touch no database."""
    report = SendReport()
    by_queue: dict[str, list[OutboxRow]] = {}
    for row in rows:
        by_queue.setdefault(row.queue, []).append(row)
    for name, queue_rows in by_queue.items():
        try:
            queue = group.queue(name)
        except UnknownQueueError as exc:
            for row in queue_rows:
                report.failed[row.id] = (row.attempts, str(exc))
            continue
        if queue.is_fifo:
            _send_in_order(queue, name, queue_rows, report, via)
        else:
            _send_at_once(queue, name, queue_rows, report, via)
        for row in queue_rows:
            if row.id in report.message_ids:
                # The job's enqueue is complete only now: log it, and tell
                # the hooks (signals, job records) as a direct send would.
                message_id = report.message_ids[row.id]
                report_enqueued(group.hooks, row.job(name), message_id, via=via)
    return report


def settle(
    connection: sa.Connection, rows: list[OutboxRow], report: SendReport, via: str
) -> None:
    """Delete the sent rows and back off the failed ones (the caller commits)."""
    _outbox_rows.delete(connection, report.sent)
    _outbox_rows.mark_failed(connection, report.failed)
    if report.failed:
        _log_failures(rows, report.failed, via)


def _chunks(rows: list[OutboxRow]) -> list[list[OutboxRow]]:
    return [
        rows[i : i + MAX_BATCH_ENTRIES] for i in range(0, len(rows), MAX_BATCH_ENTRIES)
    ]


def _send_at_once(
    queue: SqsQueue, name: str, rows: list[OutboxRow], report: SendReport, via: str
) -> None:
    """A standard queue keeps no order: several requests travel at once."""
    chunks = _chunks(rows)
    if len(chunks) == 1:
        _record(name, chunks[0], _send(queue, chunks[0]), report, via)
        return
    results = list(_pool().map(lambda chunk: _send(queue, chunk), chunks))
    for chunk, chunk_results in zip(chunks, results, strict=True):
        _record(name, chunk, chunk_results, report, via)


def _send_in_order(
    queue: SqsQueue, name: str, rows: list[OutboxRow], report: SendReport, via: str
) -> None:
    """A FIFO queue: one request after the other, and a message group that
    failed sends nothing more in this pass, so its later rows never overtake
    the failed one."""
    failed_groups: set[str | None] = set()
    for chunk in _chunks(rows):
        todo = [r for r in chunk if r.message_group_id not in failed_groups]
        if todo:
            results = _send(queue, todo)
            _record(name, todo, results, report, via)
            failed_groups.update(
                r.message_group_id for r in todo if r.id in report.failed
            )


_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """This process's threads for parallel requests, made once (not once a pass)."""
    pid = os.getpid()
    with _pools_lock:
        pool = _pools.get(pid)
        if pool is None:
            # A forked child gets threads of its own: the parent's did not survive.
            _pools.clear()
            pool = _pools[pid] = concurrent.futures.ThreadPoolExecutor(
                _PARALLEL_REQUESTS, thread_name_prefix="sqs-jobs-outbox"
            )
        return pool


def _send(queue: SqsQueue, rows: list[OutboxRow]) -> list[str | tuple[str, str]]:
    """Through the queue's own batch path: S3 offloading and size limits included."""
    try:
        return send_staged(queue, [r.send_params(queue.is_fifo) for r in rows])
    except Exception as exc:
        return [(type(exc).__name__, str(exc))] * len(rows)


def _record(
    name: str,
    rows: list[OutboxRow],
    results: list[str | tuple[str, str]],
    report: SendReport,
    via: str,
) -> None:
    for row, result in zip(rows, results, strict=True):
        if isinstance(result, str):
            report.sent.append(row.id)
            report.message_ids[row.id] = result
        else:
            report.failed[row.id] = (row.attempts, f"{result[0]}: {result[1]}")


def describe_error(exc: BaseException) -> str:
    """An error for a log line: escaped, and without SQL parameters (job data)."""
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        return loggable_text(f"{type(exc.orig).__name__}: {exc.orig}")
    return loggable_text(f"{type(exc).__name__}: {exc}")


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
