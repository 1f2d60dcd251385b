"""enqueue_many: validate every job, then send them with SendMessageBatch."""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import threading
import typing as t

import structlog

from ._exceptions import EnqueueBatchError
from ._exceptions import SQSJobsError
from ._group_commit import error_code
from ._job import Job
from ._middleware import check_single_trace_injector
from ._middleware import compose_produce
from ._middleware import JobMiddleware
from ._offloading import discard_unsent
from ._offloading import offload_entries
from ._producer import build_send_params
from ._producer import check_correlation_fields
from ._producer import check_job_type
from ._producer import check_options
from ._producer import check_payload
from ._producer import SendOptions
from ._queue import SqsQueue
from ._wire import MAX_BATCH_ENTRIES
from ._wire import message_size

if t.TYPE_CHECKING:
    from ._queue_group import QueueGroup

job_log = structlog.get_logger("flask_sqs_jobs.job")
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
    group: QueueGroup, queue_name: str, jobs: cabc.Iterable[JobSpec]
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
        results = _send_staged(queue, staged)
        for (job, _), result in zip(prepared, results, strict=True):
            if isinstance(result, str):
                _report_enqueued(group, job, result)
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
        params, dropped = build_send_params(queue, job.queue, job, options)
    except ValueError as exc:
        raise ValueError(f"jobs[{index}]: {exc}") from None
    if dropped:
        job_log.warning(
            "propagation_attributes_dropped",
            queue=job.queue,
            job_type=job.job_type,
            dropped=dropped,
        )
    return params


def _send_staged(queue: SqsQueue, staged: list[dict[str, t.Any]]) -> list[_EntryResult]:
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


def _report_enqueued(group: QueueGroup, job: Job, message_id: str) -> None:
    job_log.info(
        "job_enqueued", queue=job.queue, job_type=job.job_type, message_id=message_id
    )
    try:
        group.hooks.job_enqueued(job, message_id)
    except Exception:
        log.exception("hook_failed", hook="job_enqueued")


class _Slot:
    """One job's trip through the produce chain, meeting the batch send."""

    def __init__(self) -> None:
        self.params: dict[str, t.Any] | None = None
        self.finished = False
        self.outcome: str | BaseException | None = None
        self.sent = threading.Event()
        self.result: _EntryResult | BaseException | None = None


def _send_through_middleware(
    group: QueueGroup, queue: SqsQueue, prepared: list[tuple[Job, SendOptions]]
) -> list[_EntryResult]:
    """Run each job's produce chain in its own thread; send all staged jobs at once.

    Each chain's innermost step stages its job and waits for the batch, so
    middleware wraps the real send and sees the real MessageId.
    """
    ready = threading.Condition()
    slots = [_Slot() for _ in prepared]

    def run(index: int, job: Job, options: SendOptions) -> None:
        slot = slots[index]

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
            _report_enqueued(group, job, result)
            return result

        try:
            slot.outcome = compose_produce(group.middleware, send)(job)
        except BaseException as exc:
            slot.outcome = exc
        with ready:
            slot.finished = True
            ready.notify_all()

    threads = [
        threading.Thread(
            target=contextvars.copy_context().run,
            args=(run, index, job, options),
            name="sqs-jobs-enqueue-many",
            daemon=True,
        )
        for index, (job, options) in enumerate(prepared)
    ]
    for thread in threads:
        thread.start()
    with ready:
        ready.wait_for(lambda: all(s.params is not None or s.finished for s in slots))
    early = [
        s.outcome for s in slots if s.finished and isinstance(s.outcome, Exception)
    ]
    if early:
        for slot in slots:
            slot.result = SQSJobsError("not sent: another job of the batch was invalid")
            slot.sent.set()
        for thread in threads:
            thread.join()
        raise early[0]
    staged_indexes = [i for i, s in enumerate(slots) if s.params is not None]
    sent = _send_staged(
        queue, [t.cast(dict[str, t.Any], slots[i].params) for i in staged_indexes]
    )
    for index, result in zip(staged_indexes, sent, strict=True):
        slots[index].result = result
        slots[index].sent.set()
    for thread in threads:
        thread.join()
    results: list[_EntryResult] = []
    for slot in slots:
        if isinstance(slot.result, str | tuple):
            # Sent or refused by SQS, whatever a middleware did afterwards.
            results.append(slot.result)
            if isinstance(slot.outcome, BaseException) and isinstance(slot.result, str):
                log.warning("produce_middleware_failed", error=repr(slot.outcome))
        elif isinstance(slot.outcome, str):
            results.append(slot.outcome)  # a middleware answered without sending
        else:
            results.append((type(slot.outcome).__name__, str(slot.outcome)))
    return results
