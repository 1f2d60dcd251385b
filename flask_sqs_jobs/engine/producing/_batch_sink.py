"""SendMessageBatch: the batch sink of ``enqueue_many``, the outbox relay and the
send after commit."""

from __future__ import annotations

import typing as t

import structlog

from ..model import MAX_BATCH_ENTRIES
from ..sqs import aws_error_code
from ..sqs import discard_unsent
from ..sqs import message_size
from ..sqs import offload_entries
from ..sqs import SqsQueue
from ._sinks import BatchSink
from ._sinks import EntryResult

if t.TYPE_CHECKING:
    from ._staging import StagedMessage

log = structlog.get_logger(__name__)


class SqsBatchSink(BatchSink):
    """Sends staged messages to one queue with SendMessageBatch.

    Owns how the entries travel: bodies too large for SQS go to S3 first
    (an upload that fails refuses that entry only), then requests of at
    most ten entries and at most the queue's MaximumMessageSize each, one
    after the other, in order. SQS's partial failures come back entry by
    entry; a request that fails as a whole fails each of its entries with
    the error's code. The S3 objects of entries SQS refused are deleted
    again; those of a request that failed as a whole are kept (SQS may have
    applied it, its answer lost).

    Stateless beyond its queue and safe to call from several threads at
    once (the outbox relay sends a standard queue's chunks in parallel).
    """

    def __init__(self, queue: SqsQueue) -> None:
        self.queue = queue

    def send_batch(self, messages: t.Sequence[StagedMessage]) -> list[EntryResult]:
        """Offload what must be, then send requests in order; one result per message."""
        queue = self.queue
        staged, keys, refused = offload_entries(queue, [m.params for m in messages])
        results: list[EntryResult] = []
        #: Entries of requests that raised: SQS may have applied them (an
        #: answer lost on the way back), so their objects are kept.
        maybe_sent: set[int] = set()
        limit = queue.max_message_size
        request: list[dict[str, t.Any]] = []
        request_size = 0
        for index, params in enumerate(staged):
            if index in refused:
                results.extend(self._send(request, maybe_sent) if request else [])
                request, request_size = [], 0
                results.append(refused[index])
                continue
            size = message_size(
                params["MessageBody"], params.get("MessageAttributes", {})
            )
            if request and (
                len(request) == MAX_BATCH_ENTRIES or request_size + size > limit
            ):
                results.extend(self._send(request, maybe_sent))
                request, request_size = [], 0
            request.append({"Id": str(index), **params})
            request_size += size
        if request:
            results.extend(self._send(request, maybe_sent))
        answered = [
            "kept" if index in maybe_sent else result
            for index, result in enumerate(results)
        ]
        discard_unsent(queue, keys, t.cast(list[str | tuple[str, str]], answered))
        return results

    def _send(
        self, entries: list[dict[str, t.Any]], maybe_sent: set[int]
    ) -> list[EntryResult]:
        """One SendMessageBatch request; an error fails each of its entries
        (noted in ``maybe_sent``: the request may have been applied)."""
        try:
            return list(self.queue.send_batch(entries))
        except Exception as exc:
            log.warning(
                "enqueue_batch_failed", sqs_queue=self.queue.name, error=str(exc)
            )
            maybe_sent.update(int(entry["Id"]) for entry in entries)
            return [(aws_error_code(exc), str(exc))] * len(entries)
