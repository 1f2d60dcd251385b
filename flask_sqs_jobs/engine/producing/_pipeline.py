"""The produce pipeline: prepared jobs through their chains, staged, into a sink.

Every enqueue of the project comes through :func:`produce`:
:meth:`QueueGroup.enqueue` (one job into :class:`~._sinks.SqsSink`),
:meth:`QueueGroup.enqueue_many` (into :class:`~._batch_sink.SqsBatchSink`),
eager mode (into the eager sink) and the outbox (into its row sink). The
pipeline owns what is the same for all of them, once per job: the
trace-injector check, the ``produce`` middleware chain, staging (the body,
the attributes, the size checks) and the ``job_enqueued`` report. A sink
owns what differs: what happens to the staged message.

Messages staged earlier and kept (outbox rows) come back through
:func:`deliver`, which sends them with a batch sink and reports them.

The pipeline holds no lock and keeps no state between calls; it runs in the
caller's thread, except a batch through produce middleware
(:mod:`._batch_chains`).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import typing as t

from ..model import check_single_trace_injector
from ..model import EnqueueBatchError
from ..model import Job
from ._batch_chains import send_through_chains
from ._batch_chains import Sent
from ._chain import rechecks_produce
from ._chain import report_sent
from ._chain import run_chain
from ._chain import wraps_produce
from ._sinks import BatchSink
from ._sinks import EntryResult
from ._sinks import Sink
from ._staging import stage
from ._unique_step import UniqueStep

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues
    from ._prepare import PreparedJob
    from ._staging import StagedMessage


def produce(
    group: NamedQueues, jobs: cabc.Sequence[PreparedJob], sink: Sink | BatchSink
) -> list[str]:
    """Produce ``jobs`` (all checked already) into ``sink``; their ids, in order.

    With a :class:`Sink`, each job's chain runs in turn in this thread and
    ends in the sink; the first exception ends the call (later jobs are not
    produced) and propagates. With a :class:`BatchSink`, the messages leave
    in batches and the entries SQS refuses raise :class:`EnqueueBatchError`
    once every job was tried.

    Unique jobs take their keys first (:mod:`._unique_step`): a duplicate is
    not produced and its place gets the holder's job id.

    :raises ValueError: two trace-injecting middleware are in use (nothing
        was produced).
    :raises DuplicateJobError: a unique job with ``on_duplicate="raise"``
        found its key held (nothing was produced).
    """
    check_single_trace_injector(group.middleware)
    if not isinstance(sink, BatchSink):
        jobs = [sink.admit(prepared) for prepared in jobs]
    step = UniqueStep.take(group, jobs, sink)
    if step is not None:
        return step.around(functools.partial(_produce_admitted, group, sink=sink))
    return _produce_admitted(group, jobs, sink)


def _produce_admitted(
    group: NamedQueues, jobs: cabc.Sequence[PreparedJob], sink: Sink | BatchSink
) -> list[str]:
    """:func:`produce` once the jobs are admitted and their unique keys taken."""
    if isinstance(sink, BatchSink):
        return _produce_batch(group, jobs, sink)
    rechecked = rechecks_produce(group.middleware)
    ids = [
        run_chain(
            group,
            prepared.job,
            functools.partial(_into_sink, group, prepared, sink, rechecked),
        )
        for prepared in jobs
    ]
    sink.finish()
    return ids


def _into_sink(
    group: NamedQueues, prepared: PreparedJob, sink: Sink, rechecked: bool, job: Job
) -> str:
    """The innermost step of a job's chain: stage it, hand it to ``sink``, report it."""
    queue = (
        prepared.queue if job.queue == prepared.queue_name else group.queue(job.queue)
    )
    message = stage(prepared, job, queue, rechecked=rechecked)
    returned = sink.send(message)
    if sink.enqueues:
        report_sent(group, [message], [returned], sink.log_fields)
    sink.sent(message, returned)
    return returned


def _produce_batch(
    group: NamedQueues, jobs: cabc.Sequence[PreparedJob], sink: BatchSink
) -> list[str]:
    """A batch into ``sink``: staged up front without produce middleware, or
    through each job's chain with it (:mod:`._batch_chains`)."""
    if not jobs:
        return []
    results: list[Sent]
    if wraps_produce(group.middleware):
        results = send_through_chains(group, list(jobs), sink)
    else:
        messages = [stage(p, p.job, p.queue, rechecked=False) for p in jobs]
        results = [_sent_or_failed(r) for r in sink.send_batch(messages)]
        report_sent(group, messages, results, {})
    enqueued = [(i, r) for i, r in enumerate(results) if isinstance(r, str)]
    failed = [(i, r[0], r[1]) for i, r in enumerate(results) if not isinstance(r, str)]
    if failed:
        raise EnqueueBatchError(enqueued, failed, len(results))
    return [message_id for _, message_id in enqueued]


def _sent_or_failed(result: EntryResult) -> Sent:
    return ("NotSent", "the sink did not send it") if result is None else result


def deliver(
    group: NamedQueues,
    messages: cabc.Sequence[StagedMessage],
    sink: BatchSink,
    **fields: object,
) -> list[EntryResult]:
    """Send messages staged earlier (outbox rows) with ``sink``; report those sent.

    No middleware runs (it ran when the messages were staged). ``fields``
    go on each ``job_enqueued`` line (``via="relay"``). Returns one result
    per message, in order; never raises for a refused entry.
    """
    results = sink.send_batch(messages)
    report_sent(group, messages, results, fields)
    return results
