"""Send outbox rows to SQS, then delete them, back them off or park them.

Both the immediate send after a commit and the relay come through
:func:`send_rows`, which hands each queue's rows, as the messages they were
staged into, to the engine's produce pipeline (:func:`deliver`): it sends them
with SendMessageBatch (:class:`RowBatches` around the engine's batch sink) and
reports ``job_enqueued`` for each one sent. :func:`send_claimed` does so
inside the transaction that holds the rows' locks and writes the outcome
back there, so a row is deleted in the same transaction that saw it sent,
and a crash between the send and the commit at worst sends it again, with
the same job id. A request SQS refuses as a whole for what it carries (one
entry too large) is sent again one message at a time, so an innocent row
never fails with a poisoned one.
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
from ...engine.producing import BatchSink
from ...engine.producing import deliver
from ...engine.producing import EntryResult
from ...engine.producing import SqsBatchSink
from ...engine.producing import StagedMessage
from ...engine.producing import stored_message
from . import _rows as _outbox_rows
from ._rows import DEFAULT_MAX_ATTEMPTS
from ._rows import OutboxRow

if t.TYPE_CHECKING:
    from ...engine import QueueGroup
    from ...engine.sqs import SqsQueue

log = structlog.get_logger(__name__)

#: SendMessageBatch requests in flight at once for a standard queue.
_PARALLEL_REQUESTS = 4


@dataclasses.dataclass
class SendReport:
    """What one pass sent and what failed (row id -> (attempts so far, error)).

    Filled by :func:`send_rows` in the sending thread, then written back by
    :func:`write_back` in the same transaction that claimed the rows.
    """

    sent: list[int] = dataclasses.field(default_factory=list)
    #: row id -> the MessageId SQS gave it.
    message_ids: dict[int, str] = dataclasses.field(default_factory=dict)
    failed: dict[int, tuple[int, str]] = dataclasses.field(default_factory=dict)
    #: Failed rows that can never be sent as they are: parked at once.
    poisoned: set[int] = dataclasses.field(default_factory=set)
    #: The failed rows parked by the write-back (out of attempts, or poisoned).
    parked: list[int] = dataclasses.field(default_factory=list)

    @property
    def handled(self) -> int:
        """Rows sent or failed (a FIFO row held back by its group is neither)."""
        return len(self.sent) + len(self.failed)


def send_claimed(
    connection: sa.Connection,
    group: QueueGroup,
    rows: list[OutboxRow],
    via: str,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> SendReport:
    """Send ``rows`` (locked by ``connection``), delete the sent, back off the rest."""
    report = send_rows(group, rows, via)
    write_back(connection, rows, report, via, max_attempts=max_attempts)
    return report


def send_rows(group: QueueGroup, rows: list[OutboxRow], via: str) -> SendReport:
    """Send ``rows`` to their queues, reporting each one sent; touch no database.

    :param via: ``"immediate"`` or ``"relay"``, on every log line.
    """
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
        messages = [
            stored_message(
                queue, name, row.job_id, row.job_type, row.send_params(queue.is_fifo)
            )
            for row in queue_rows
        ]
        # The job's enqueue is complete only now: deliver reports it to the
        # hooks (signals, job records) as a direct send would.
        results = deliver(group, messages, RowBatches(queue), via=via)
        _record(queue_rows, results, report)
    return report


def write_back(
    connection: sa.Connection,
    rows: list[OutboxRow],
    report: SendReport,
    via: str,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> None:
    """Delete the sent rows, back off the failed ones, park those out of attempts.

    The caller commits. Cost: one delete by primary key, and one update per
    distinct failure (see :func:`~._rows.mark_failed`).
    """
    _outbox_rows.delete(connection, report.sent)
    report.parked = _outbox_rows.mark_failed(
        connection, report.failed, max_attempts=max_attempts, poisoned=report.poisoned
    )
    if report.failed:
        _log_failures(rows, report, via)


class RowBatches(BatchSink):
    """The outbox's way of sending one queue's rows: the engine's batch sink, in
    chunks of ten rows, keeping FIFO order.

    A standard queue keeps no order, so several requests travel at once (on
    this process's pool of threads). A FIFO queue's requests go one after the
    other, and a message group that failed sends nothing more in this pass,
    so its later rows never overtake the failed one: those rows are answered
    None (not tried), and stay for the next pass. Made for one queue of one
    pass, in the sending thread.
    """

    def __init__(self, queue: SqsQueue) -> None:
        self._queue = queue
        self._sink = SqsBatchSink(queue)

    def send_batch(self, messages: t.Sequence[StagedMessage]) -> list[EntryResult]:
        """Send one queue's messages in chunks of ten; one result per message."""
        chunks = [
            list(messages[i : i + MAX_BATCH_ENTRIES])
            for i in range(0, len(messages), MAX_BATCH_ENTRIES)
        ]
        if self._queue.is_fifo:
            return self._in_order(chunks)
        if len(chunks) == 1:
            return self._send(chunks[0])
        return [result for sent in _pool().map(self._send, chunks) for result in sent]

    def _in_order(self, chunks: list[list[StagedMessage]]) -> list[EntryResult]:
        """One request after the other; a failed group sends nothing more."""
        results: list[EntryResult] = []
        failed_groups: set[str | None] = set()
        for chunk in chunks:
            todo = [m for m in chunk if _group_of(m) not in failed_groups]
            answers = self._send(todo) if todo else []
            sent = dict(zip(map(id, todo), answers, strict=True))
            results.extend(sent.get(id(message)) for message in chunk)
            failed_groups.update(
                _group_of(m) for m in todo if not isinstance(sent[id(m)], str)
            )
        return results

    def _send(self, messages: list[StagedMessage]) -> list[EntryResult]:
        """One chunk through the engine's batch sink; an error fails each row.

        A request SQS refuses for its content as a whole (one entry too large
        for the queue, the request too long) is sent again one message at a
        time, so only the rows at fault fail.
        """
        results = self._request(messages)
        if len(messages) > 1 and _refused_whole(results):
            return self._one_by_one(messages)
        return results

    def _one_by_one(self, messages: list[StagedMessage]) -> list[EntryResult]:
        """Each message alone, in order; on FIFO a failed group sends nothing more."""
        results: list[EntryResult] = []
        failed_groups: set[str | None] = set()
        for message in messages:
            if self._queue.is_fifo and _group_of(message) in failed_groups:
                results.append(None)
                continue
            (result,) = self._request([message])
            if not isinstance(result, str):
                failed_groups.add(_group_of(message))
            results.append(result)
        return results

    def _request(self, messages: list[StagedMessage]) -> list[EntryResult]:
        try:
            return self._sink.send_batch(messages)
        except Exception as exc:
            return [(type(exc).__name__, str(exc))] * len(messages)


#: Codes of a SendMessageBatch refused as a whole for what it carries (moto and
#: SQS refuse a batch holding one message over the queue's MaximumMessageSize).
_CONTENT_REFUSED = frozenset(
    {
        "BatchRequestTooLong",
        "AWS.SimpleQueueService.BatchRequestTooLong",
        "InvalidParameterValue",
        "InvalidMessageContents",
        "AWS.SimpleQueueService.InvalidMessageContents",
        "InvalidAttributeValue",
        "InvalidAttributeName",
        "MissingParameter",
        "ParamValidationError",
    }
)


def _refused_whole(results: list[EntryResult]) -> bool:
    """Every entry failed with one error, a code refusing the request's content."""
    first = results[0] if results else None
    return (
        isinstance(first, tuple)
        and first[0] in _CONTENT_REFUSED
        and all(result == first for result in results)
    )


def _group_of(message: StagedMessage) -> str | None:
    """The message's FIFO group (None on a standard queue)."""
    return message.params.get("MessageGroupId")


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


def _record(
    rows: list[OutboxRow], results: list[EntryResult], report: SendReport
) -> None:
    """Note each row's result in ``report``; rows not tried are left out."""
    for row, result in zip(rows, results, strict=True):
        if isinstance(result, str):
            report.sent.append(row.id)
            report.message_ids[row.id] = result
        elif result is not None:
            report.failed[row.id] = (row.attempts, f"{result[0]}: {result[1]}")
            if result[0] in _REFUSED_BEFORE_SENDING:
                report.poisoned.add(row.id)


#: Errors of a row refused before it left this process (botocore checks the
#: parameters): the same every time, so the row is parked at once.
_REFUSED_BEFORE_SENDING = frozenset({"ParamValidationError"})


def describe_error(exc: BaseException) -> str:
    """An error for a log line: escaped, and without SQL parameters (job data)."""
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        return loggable_text(f"{type(exc.orig).__name__}: {exc.orig}")
    return loggable_text(f"{type(exc).__name__}: {exc}")


def _log_failures(rows: list[OutboxRow], report: SendReport, via: str) -> None:
    """``outbox_send_failed`` for the rows backing off, ``outbox_row_parked`` for
    those parked: count, job ids, errors (one line each per pass)."""
    failed, parked = report.failed, set(report.parked)
    retrying = [r for r in rows if r.id in failed and r.id not in parked]
    if retrying:
        log.warning(
            "outbox_send_failed",
            via=via,
            count=len(retrying),
            job_ids=[loggable_text(r.job_id) for r in retrying[:20]],
            error=_errors(retrying, failed),
            retry_in_seconds=min(
                _outbox_rows.backoff_seconds(failed[r.id][0] + 1) for r in retrying
            ),
        )
    gone = [r for r in rows if r.id in parked]
    if gone:
        log.error(
            "outbox_row_parked",
            via=via,
            count=len(gone),
            job_ids=[loggable_text(r.job_id) for r in gone[:20]],
            row_ids=[r.id for r in gone[:20]],
            attempts=max(failed[r.id][0] + 1 for r in gone),
            error=_errors(gone, failed),
            next="flask sqs-jobs outbox list --parked",
        )


def _errors(rows: list[OutboxRow], failed: dict[int, tuple[int, str]]) -> str:
    return loggable_text("; ".join(sorted({failed[r.id][1] for r in rows})))
