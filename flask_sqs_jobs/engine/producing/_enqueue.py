"""``QueueGroup.enqueue`` and ``enqueue_many``: prepare, pick the queue's sink, produce.

The sink follows from the queue, as an httpx client picks a transport by
URL: an :class:`~._eager_sink.EagerQueue` runs what is produced on it, any
other queue sends it to SQS (SendMessage for one job, SendMessageBatch for
a batch).
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from ..sqs import priority_queue
from ._batch_sink import SqsBatchSink
from ._eager_sink import EagerQueue
from ._pipeline import produce
from ._prepare import prepare_job
from ._prepare import prepare_jobs
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
    """See :meth:`QueueGroup.enqueue`; ``options`` are its keyword arguments."""
    queue_name, queue, options = target_queue(group, queue_name, options)
    prepared = prepare_job(queue, queue_name, job_type, payload, options)
    return produce(group, [prepared], single_sink(queue))[0]


def enqueue_many(
    group: NamedQueues, queue_name: str, specs: cabc.Iterable[object]
) -> list[str]:
    """See :meth:`QueueGroup.enqueue_many` (a queue with priority levels: its
    default level)."""
    queue_name, queue, _ = target_queue(group, queue_name, {})
    prepared = prepare_jobs(queue, queue_name, specs)
    return produce(group, prepared, batch_sink(queue))


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
