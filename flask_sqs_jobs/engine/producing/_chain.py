"""The two steps every produced job takes, each written once: its chain, its report.

:func:`run_chain` is the only caller of ``compose_produce`` and
:func:`report_sent` the only caller of :func:`report_enqueued`; the
pipeline (:mod:`._pipeline`) and its batch path through middleware
(:mod:`._batch_chains`) both come through them.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import structlog

from ..model import call_hook
from ..model import compose_produce
from ..model import Job
from ..model import JobMiddleware

if t.TYPE_CHECKING:
    from ..model import Hooks
    from ..sqs import NamedQueues
    from ._sinks import EntryResult
    from ._staging import StagedMessage

job_log = structlog.get_logger("flask_sqs_jobs.job")


def wraps_produce(middleware: cabc.Sequence[JobMiddleware]) -> bool:
    """Whether any of ``middleware`` overrides ``produce`` (and may change a job)."""
    return any(type(m).produce is not JobMiddleware.produce for m in middleware)


def rechecks_produce(middleware: cabc.Sequence[JobMiddleware]) -> bool:
    """Whether a job must be checked and encoded again after the ``produce``
    chain: some middleware overrides it without declaring ``keeps_payload``."""
    return any(
        type(m).produce is not JobMiddleware.produce and not m.keeps_payload
        for m in middleware
    )


def run_chain(group: NamedQueues, job: Job, terminal: cabc.Callable[[Job], str]) -> str:
    """Run ``job`` through the group's ``produce`` middleware, outermost first,
    into ``terminal``; return what the chain returns."""
    return compose_produce(group.middleware, terminal)(job)


def report_sent(
    group: NamedQueues,
    messages: cabc.Sequence[StagedMessage],
    results: cabc.Sequence[EntryResult],
    fields: cabc.Mapping[str, object],
) -> None:
    """Report ``job_enqueued`` for each message whose result is a MessageId.

    Called once a message is on its queue (or, eager, about to run), in the
    thread that sent it, in the messages' order.
    """
    for message, result in zip(messages, results, strict=True):
        if isinstance(result, str):
            report_enqueued(group.hooks, message.job, result, **fields)


def report_enqueued(hooks: Hooks, job: Job, message_id: str, **fields: object) -> None:
    """Log ``job_enqueued`` and call the ``job_enqueued`` hook (isolated)."""
    job_log.info(
        "job_enqueued",
        queue=job.queue,
        job_type=job.job_type,
        job_id=job.job_id,
        message_id=message_id,
        **fields,
    )
    call_hook("job_enqueued", hooks.job_enqueued, job, message_id)
