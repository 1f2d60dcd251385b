"""``QueueGroup.enqueue`` and ``enqueue_many``: prepare, pick the queue's sink, produce.

The sink follows from the queue, as an httpx client picks a transport by
URL: an :class:`~._eager_sink.EagerQueue` runs what is produced on it, any
other queue sends it to SQS (SendMessage for one job, SendMessageBatch for
a batch).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import typing as t

from ..model import EnqueueBatchError
from ..sqs import priority_queue
from ._batch_sink import SqsBatchSink
from ._eager_sink import EagerQueue
from ._pipeline import produce
from ._prepare import prepare_job
from ._prepare import prepare_jobs
from ._prepare import PreparedJob
from ._sinks import BatchSink
from ._sinks import Sink
from ._sinks import SqsSink

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues
    from ..sqs import SqsQueue

_SEND_MESSAGE = SqsSink()


def enqueue(
    group: NamedQueues,
    queue_name: str,
    job_type: object,
    payload: object,
    options: cabc.Mapping[str, t.Any],
) -> str:
    """See :meth:`QueueGroup.enqueue`; ``options`` are its keyword arguments
    (``buffered``: hand the job to the group's send buffer, and return its
    job id)."""
    options = dict(options)
    buffered = bool(options.pop("buffered", False))
    queue_name, queue, options = target_queue(group, queue_name, options)
    prepared = prepare_job(queue, queue_name, job_type, payload, options)
    sink = single_sink(queue)
    if buffered and sink is _SEND_MESSAGE:
        if group.send_buffer is None:
            raise RuntimeError(
                "buffered=True needs the group's send buffer: set"
                " SQS_JOBS_SEND_BUFFER_MS, or use SQSJobs (it makes one)"
            )
        sink = group.send_buffer
    return produce(group, [prepared], sink)[0]


def enqueue_many(
    group: NamedQueues, queue_name: str, specs: cabc.Iterable[object]
) -> list[str]:
    """See :meth:`QueueGroup.enqueue_many`: each job on the level of its
    ``priority`` on a queue with priority levels (its middle level without
    one), the jobs of each level in batches of their own."""
    prepared = prepare_batch(group, queue_name, specs)
    by_queue: dict[str, list[PreparedJob]] = {}
    for job in prepared:
        by_queue.setdefault(job.queue_name, []).append(job)
    if not prepared:
        return []
    if len(by_queue) == 1:
        return produce(group, prepared, batch_sink(prepared[0].queue))
    return _produce_per_queue(group, list(by_queue.values()), len(prepared))


def prepare_batch(
    group: NamedQueues,
    queue_name: str,
    specs: cabc.Iterable[object],
    *,
    job_id_deduplicates: bool = False,
) -> list[PreparedJob]:
    """Check a batch's jobs for the logical ``queue_name``, each on the queue
    of its ``priority`` (:func:`target_queue`); nothing is sent.

    :raises TypeError, ValueError: a job is wrong (its index named).
    """
    if not group.priority_levels.get(queue_name):
        group.queue(queue_name)  # an unknown queue is refused even with no jobs
    return prepare_jobs(
        functools.partial(target_queue, group, queue_name),
        specs,
        job_id_deduplicates=job_id_deduplicates,
    )


def _produce_per_queue(
    group: NamedQueues, batches: list[list[PreparedJob]], total: int
) -> list[str]:
    """Each queue's batch in turn; every batch is tried, refusals are merged."""
    sent: dict[int, str] = {}
    failed: list[tuple[int, str, str]] = []
    for batch in batches:
        where = [t.cast(int, job.index) for job in batch]
        try:
            ids = produce(group, batch, batch_sink(batch[0].queue))
        except EnqueueBatchError as exc:
            sent.update((where[i], message_id) for i, message_id in exc.enqueued)
            failed.extend((where[i], code, text) for i, code, text in exc.failed)
            continue
        sent.update(zip(where, ids, strict=True))
    if failed:
        raise EnqueueBatchError(sorted(sent.items()), sorted(failed), total)
    return [sent[index] for index in range(total)]


def target_queue(
    group: NamedQueues, queue_name: str, options: cabc.Mapping[str, t.Any]
) -> tuple[str, SqsQueue, dict[str, t.Any]]:
    """The queue a job goes to, and its options without ``priority``.

    A queue with priority levels sends to the level of ``priority`` (its
    middle level without one); see ``engine/sqs/_priorities.py``.

    :raises TypeError, ValueError: ``priority`` is no level of the queue.
    """
    rest = dict(options)
    name = priority_queue(group.priority_levels, queue_name, rest.pop("priority", None))
    return name, group.queue(name), rest


def single_sink(queue: SqsQueue) -> Sink:
    """Where one job produced on ``queue`` goes."""
    return queue.sink if isinstance(queue, EagerQueue) else _SEND_MESSAGE


def batch_sink(queue: SqsQueue) -> Sink | BatchSink:
    """Where a batch produced on ``queue`` goes (eager: each job runs in turn)."""
    return queue.sink if isinstance(queue, EagerQueue) else SqsBatchSink(queue)
