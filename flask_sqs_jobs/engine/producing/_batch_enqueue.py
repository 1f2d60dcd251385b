"""enqueue_many: validate every job, then send them with SendMessageBatch."""

from __future__ import annotations

import collections.abc as cabc
import concurrent.futures
import contextvars
import functools
import threading
import typing as t

import structlog

from ..model import check_job_id
from ..model import check_single_trace_injector
from ..model import compose_produce
from ..model import EnqueueBatchError
from ..model import Job
from ..model import JobMiddleware
from ..model import MAX_BATCH_ENTRIES
from ..model import SQSJobsError
from ..sqs import discard_unsent
from ..sqs import error_code
from ..sqs import message_size
from ..sqs import offload_entries
from ..sqs import SqsQueue
from ._producer import check_correlation_fields
from ._producer import check_job_type
from ._producer import check_options
from ._producer import check_payload
from ._producer import report_enqueued
from ._producer import SendOptions
from ._producer import stage_job

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues

log = structlog.get_logger(__name__)

#: One job of :meth:`QueueGroup.enqueue_many`: ``(job_type, payload)`` or a
#: dict with ``job_type``, ``payload`` and any enqueue option.
JobSpec: t.TypeAlias = tuple[str, dict[str, t.Any] | None] | cabc.Mapping[str, t.Any]

#: The outcome of one entry: its MessageId, or SQS's ``(code, message)``.
_EntryResult: t.TypeAlias = str | tuple[str, str]


class _EntryFailed(SQSJobsError):
    """SQS refused this entry of a batch (raised inside a produce chain)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.sqs_message = message


def enqueue_many(
    group: NamedQueues, queue_name: str, jobs: cabc.Iterable[JobSpec]
) -> list[str]:
    """See :meth:`QueueGroup.enqueue_many`."""
    queue = group.queue(queue_name)
    prepared = [prepare_job(queue, queue_name, i, spec) for i, spec in enumerate(jobs)]
    check_single_trace_injector(group.middleware)
    if not prepared:
        return []
    if any(_wraps_produce(m) for m in group.middleware):
        results = _send_through_middleware(group, queue, prepared)
    else:
        staged = [
            _stage(queue, job, options, i) for i, (job, options) in enumerate(prepared)
        ]
        results = send_staged(queue, staged)
        for (job, _), result in zip(prepared, results, strict=True):
            if isinstance(result, str):
                report_enqueued(group.hooks, job, result)
    enqueued = [(i, r) for i, r in enumerate(results) if isinstance(r, str)]
    failed = [(i, r[0], r[1]) for i, r in enumerate(results) if not isinstance(r, str)]
    if failed:
        raise EnqueueBatchError(enqueued, failed, len(results))
    return [message_id for _, message_id in enqueued]


def prepare_job(
    queue: SqsQueue, queue_name: str, index: int, spec: object
) -> tuple[Job, SendOptions]:
    """Check one job of a batch; errors name its index.

    :meta private:
    """
    try:
        if isinstance(spec, tuple):
            if len(spec) != 2:
                raise TypeError("a job must be a (job_type, payload) pair or a dict")
            job_type, payload = spec
            options: dict[str, t.Any] = {}
        elif isinstance(spec, cabc.Mapping):
            options = dict(spec)
            if "job_type" not in options:
                raise TypeError("a job dict needs a 'job_type' key")
            job_type = options.pop("job_type")
            payload = options.pop("payload", None)
        else:
            raise TypeError(
                "a job must be a (job_type, payload) pair or a dict with 'job_type',"
                f" 'payload' and enqueue options; got {type(spec).__name__}"
            )
        fields = check_correlation_fields(options.pop("correlation_fields", None))
        job = Job(
            job_type=check_job_type(job_type),
            payload=check_payload(payload),
            queue=queue_name,
            correlation_fields=fields,
            job_id=check_job_id(options.pop("job_id", None)),
        )
        return job, check_options(queue, queue_name, options)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"jobs[{index}]: {exc}") from None


def _wraps_produce(middleware: JobMiddleware) -> bool:
    return type(middleware).produce is not JobMiddleware.produce


def _stage(
    queue: SqsQueue, job: Job, options: SendOptions, index: int
) -> dict[str, t.Any]:
    try:
        return stage_job(queue, job, options)
    except ValueError as exc:
        raise ValueError(f"jobs[{index}]: {exc}") from None


def send_staged(queue: SqsQueue, staged: list[dict[str, t.Any]]) -> list[_EntryResult]:
    """Send in batches of at most ten entries and the queue's size limit each."""
    staged, keys, refused = offload_entries(queue, staged)
    results: list[_EntryResult] = []
    limit = queue.max_message_size
    batch: list[dict[str, t.Any]] = []
    batch_size = 0
    for index, params in enumerate(staged):
        if index in refused:
            results.extend(_send_batch(queue, batch) if batch else [])
            batch, batch_size = [], 0
            results.append(refused[index])
            continue
        size = message_size(params["MessageBody"], params.get("MessageAttributes", {}))
        if batch and (len(batch) == MAX_BATCH_ENTRIES or batch_size + size > limit):
            results.extend(_send_batch(queue, batch))
            batch, batch_size = [], 0
        batch.append({"Id": str(index), **params})
        batch_size += size
    if batch:
        results.extend(_send_batch(queue, batch))
    discard_unsent(queue, keys, results)
    return results


def _send_batch(queue: SqsQueue, entries: list[dict[str, t.Any]]) -> list[_EntryResult]:
    try:
        return queue.send_batch(entries)
    except Exception as exc:
        log.warning("enqueue_batch_failed", sqs_queue=queue.name, error=str(exc))
        return [(error_code(exc), str(exc))] * len(entries)


class _Slot:
    """One job's trip through the produce chain, meeting the batch send."""

    def __init__(self) -> None:
        self.params: dict[str, t.Any] | None = None
        self.finished = False
        self.outcome: str | BaseException | None = None
        self.sent = threading.Event()
        self.result: _EntryResult | BaseException | None = None

    def release(self, result: _EntryResult | BaseException) -> None:
        """Let the chain's innermost step return (or raise) ``result``."""
        if not self.sent.is_set():
            self.result = result
            self.sent.set()


def _send_through_middleware(
    group: NamedQueues, queue: SqsQueue, prepared: list[tuple[Job, SendOptions]]
) -> list[_EntryResult]:
    """Run the jobs' produce chains ten at a time on a pool of ten threads.

    Each chain's innermost step stages its job and waits; once every chain of
    a chunk has staged (or finished without sending), the chunk goes out in
    one request, so middleware wraps the real send and sees the real MessageId.
    Every job is staged once without middleware first, so a job that cannot
    be sent fails before anything is.
    """
    for index, (job, options) in enumerate(prepared):
        _stage(queue, job, options, index)
    results: list[_EntryResult] = []
    workers = min(MAX_BATCH_ENTRIES, len(prepared))
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix="sqs-jobs-enqueue-many"
    ) as pool:
        for start in range(0, len(prepared), MAX_BATCH_ENTRIES):
            chunk = prepared[start : start + MAX_BATCH_ENTRIES]
            try:
                results.extend(_send_chunk(group, queue, pool, start, chunk, results))
            except _NotStarted as exc:
                _not_started(results, len(prepared), exc)
    return results


class _NotStarted(SQSJobsError):
    """A thread for a produce chain could not be started."""


def _not_started(
    results: list[_EntryResult], total: int, error: _NotStarted
) -> t.NoReturn:
    failed = (type(error.__cause__).__name__, str(error))
    results.extend([failed] * (total - len(results)))
    enqueued = [(i, r) for i, r in enumerate(results) if isinstance(r, str)]
    failures = [(i, r[0], r[1]) for i, r in enumerate(results) if isinstance(r, tuple)]
    raise EnqueueBatchError(enqueued, failures, total) from error.__cause__


def _send_chunk(
    group: NamedQueues,
    queue: SqsQueue,
    pool: concurrent.futures.ThreadPoolExecutor,
    offset: int,
    chunk: list[tuple[Job, SendOptions]],
    earlier: list[_EntryResult],
) -> list[_EntryResult]:
    """Run one chunk's chains, send what they staged, return their results."""
    ready = threading.Condition()
    slots = [_Slot() for _ in chunk]

    def run(slot: _Slot, index: int, job: Job, options: SendOptions) -> None:
        def send(job: Job) -> str:
            params = _stage(queue, job, options, index)
            with ready:
                slot.params = params
                ready.notify_all()
            slot.sent.wait()
            result = slot.result
            if isinstance(result, BaseException):
                raise result
            if isinstance(result, tuple):
                raise _EntryFailed(*result)
            assert result is not None
            report_enqueued(group.hooks, job, result)
            return result

        try:
            slot.outcome = compose_produce(group.middleware, send)(job)
        except BaseException as exc:
            slot.outcome = exc
        with ready:
            slot.finished = True
            ready.notify_all()

    futures: list[concurrent.futures.Future[None]] = []
    try:
        for position, (job, options) in enumerate(chunk):
            chain = functools.partial(
                run, slots[position], offset + position, job, options
            )
            try:
                futures.append(pool.submit(contextvars.copy_context().run, chain))
            except RuntimeError as exc:
                # The job submitted last may still be queued: never run it.
                pool.shutdown(wait=False, cancel_futures=True)
                raise _NotStarted(
                    f"not sent: could not start a thread for the produce middleware"
                    f" ({exc})"
                ) from exc
        with ready:
            ready.wait_for(lambda: all(s.params or s.finished for s in slots))
        early = [
            s.outcome for s in slots if s.finished and isinstance(s.outcome, Exception)
        ]
        if early and not earlier:
            raise early[0]  # nothing was sent yet: the batch fails as a whole
        staged = [i for i, s in enumerate(slots) if s.params is not None]
        sent = send_staged(
            queue, [t.cast(dict[str, t.Any], slots[i].params) for i in staged]
        )
        for index, result in zip(staged, sent, strict=True):
            slots[index].release(result)
    finally:
        for slot in slots:
            slot.release(SQSJobsError("not sent: another job of the batch failed"))
        concurrent.futures.wait(futures)
    return [_chain_result(slot) for slot in slots]


def _chain_result(slot: _Slot) -> _EntryResult:
    if isinstance(slot.result, str | tuple):
        # Sent or refused by SQS, whatever a middleware did afterwards.
        if isinstance(slot.outcome, BaseException) and isinstance(slot.result, str):
            log.warning("produce_middleware_failed", error=repr(slot.outcome))
        return slot.result
    if isinstance(slot.outcome, str):
        return slot.outcome  # a middleware answered without sending
    return (type(slot.outcome).__name__, str(slot.outcome))
