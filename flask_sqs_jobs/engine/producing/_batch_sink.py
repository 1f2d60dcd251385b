"""SendMessageBatch: the batch sink of ``enqueue_many``, the outbox relay and the
send after commit."""

from __future__ import annotations

import concurrent.futures
import contextvars
import os
import threading
import typing as t

import structlog

from ..model import MAX_BATCH_ENTRIES
from ..sqs import aws_error_code
from ..sqs import discard_unsent
from ..sqs import may_have_been_applied
from ..sqs import message_size
from ..sqs import offload
from ..sqs import offload_entries
from ..sqs import ReuploadFailed
from ..sqs import send_fresh_copies
from ..sqs import SqsQueue
from ._sinks import BatchSink
from ._sinks import EntryResult

if t.TYPE_CHECKING:
    from ._staging import StagedMessage

log = structlog.get_logger(__name__)

#: SendMessageBatch requests of one standard queue's batch sent at once, at most.
PARALLEL_REQUESTS = 4


class SqsBatchSink(BatchSink):
    """Sends staged messages to one queue with SendMessageBatch.

    Owns how the entries travel: bodies too large for SQS go to S3 first
    (an upload that fails refuses that entry only), then requests of at
    most ten entries and at most the queue's MaximumMessageSize each, one
    after the other, in order. SQS's partial failures come back entry by
    entry; a request that fails as a whole fails each of its entries with
    the error's code. The S3 objects of entries SQS refused are deleted
    again; those of a request that failed without SQS's answer (a timeout,
    a reset, a 5xx) are kept, as SQS may have applied it.

    Stateless beyond its queue and safe to call from several threads at
    once; the requests of a standard queue's batch go out in parallel on
    the process's few request threads.
    """

    def __init__(self, queue: SqsQueue) -> None:
        self.queue = queue

    def send_batch(self, messages: t.Sequence[StagedMessage]) -> list[EntryResult]:
        """Offload what must be, then send the requests; one result per message.

        A FIFO queue's requests go one after the other, in order; a standard
        queue's, when there are several, up to :data:`PARALLEL_REQUESTS` at
        once (on AWS each request is a round trip of its own).
        """
        queue = self.queue
        originals = [m.params for m in messages]
        staged, keys, refused = offload_entries(queue, originals)
        attempt = _Attempt(queue, originals, staged, keys)
        # In order: a request's entries (their indices), or a refused entry's result.
        plan: list[list[int] | EntryResult] = []
        limit = queue.max_message_size
        request: list[int] = []
        request_size = 0
        for index, params in enumerate(staged):
            if index in refused:
                if request:
                    plan.append(request)
                request, request_size = [], 0
                plan.append(refused[index])
                continue
            size = message_size(
                params["MessageBody"], params.get("MessageAttributes", {})
            )
            if request and (
                len(request) == MAX_BATCH_ENTRIES or request_size + size > limit
            ):
                plan.append(request)
                request, request_size = [], 0
            request.append(index)
            request_size += size
        if request:
            plan.append(request)
        requests = [step for step in plan if isinstance(step, list)]
        answers = iter(_send_requests(attempt, requests, in_order=queue.is_fifo))
        results: list[EntryResult] = []
        for step in plan:
            if isinstance(step, list):
                results.extend(next(answers))
            else:
                results.append(step)
        answered = [
            "kept" if index in attempt.maybe_sent else result
            for index, result in enumerate(results)
        ]
        discard_unsent(queue, keys, t.cast(list[str | tuple[str, str]], answered))
        return results


def _send_requests(
    attempt: _Attempt, requests: list[list[int]], *, in_order: bool
) -> list[list[EntryResult]]:
    """Each request's results, in the requests' order."""
    if in_order or len(requests) < 2:
        return [attempt.send(indices) for indices in requests]
    pool = _request_pool()
    futures = [
        pool.submit(contextvars.copy_context().run, attempt.send, indices)
        for indices in requests
    ]
    return [future.result() for future in futures]


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _request_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's threads for parallel SendMessageBatch requests, made on
    first use (and again in a forked child, which has none of its parent's)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                PARALLEL_REQUESTS, thread_name_prefix="sqs-jobs-batch-send"
            )
        return _pool


def _forget_pool() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


class _Attempt:
    """The requests of one ``send_batch``: what they send, and what may be on SQS."""

    def __init__(
        self,
        queue: SqsQueue,
        originals: list[dict[str, t.Any]],
        staged: list[dict[str, t.Any]],
        keys: dict[int, str],
    ) -> None:
        self.queue = queue
        self.originals = originals
        self.staged = staged
        self.keys = keys
        #: Entries of requests that raised without SQS's answer: SQS may
        #: have applied them, so their objects are kept.
        self.maybe_sent: set[int] = set()

    def send(self, indices: list[int]) -> list[EntryResult]:
        """One SendMessageBatch of ``indices``; an error fails each entry.

        A request with offloaded entries that may have been applied is sent
        again with new objects, at most ``OFFLOADED_SEND_ATTEMPTS`` times.
        """
        queue = self.queue

        def request() -> list[EntryResult]:
            entries = [{"Id": str(i), **self.staged[i]} for i in indices]
            return list(queue.send_batch(entries))

        try:
            if not any(index in self.keys for index in indices):
                return request()
            return send_fresh_copies(
                queue.client,
                request,
                reupload=lambda: self._offload_again(indices),
                refused=lambda: None,  # send_batch's caller deletes refused objects
                sqs_queue=queue.name,
            )
        except ReuploadFailed as exc:
            log.warning("large_payload_upload_failed", error=str(exc.__cause__))
            self.maybe_sent.update(indices)
            upload_error = t.cast(BaseException, exc.__cause__)
            return [(aws_error_code(upload_error), str(exc))] * len(indices)
        except Exception as exc:
            log.warning("enqueue_batch_failed", sqs_queue=queue.name, error=str(exc))
            if may_have_been_applied(exc):
                self.maybe_sent.update(indices)
            return [(aws_error_code(exc), str(exc))] * len(indices)

    def _offload_again(self, indices: list[int]) -> None:
        """New objects for the offloaded entries of ``indices`` (raises S3's error)."""
        for index in indices:
            if index in self.keys:
                self.staged[index], key = offload(self.queue, self.originals[index])
                self.keys[index] = t.cast(str, key)
