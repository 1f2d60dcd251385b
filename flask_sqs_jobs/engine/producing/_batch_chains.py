"""A batch through produce middleware: each chain stages and waits, then one request.

Middleware wraps the real send and sees the real MessageId, so a job's
chain cannot return before its message is sent; yet ten jobs must leave in
one SendMessageBatch. Each job's chain therefore runs on a thread of its
own, ten at a time: its innermost step stages the message and waits on a
:class:`_PendingSend`; once every chain of the chunk has staged (or
returned without sending), the chunk goes out in one request and each
pending send is answered with its entry's result.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import threading
import typing as t

import structlog

from ..model import EnqueueBatchError
from ..model import Job
from ..model import MAX_BATCH_ENTRIES
from ..model import SQSJobsError
from ._chain import rechecks_produce
from ._chain import report_sent
from ._chain import run_chain
from ._staging import stage

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues
    from ._prepare import PreparedJob
    from ._sinks import BatchSink
    from ._sinks import EntryResult
    from ._staging import StagedMessage

log = structlog.get_logger(__name__)

#: What one job of a batch came to: its MessageId or ``(code, message)``.
Sent: t.TypeAlias = str | tuple[str, str]


class EntryFailed(SQSJobsError):
    """SQS refused this entry of a batch (raised inside its produce chain)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.sqs_message = message


class _NotStarted(SQSJobsError):
    """A thread for a produce chain could not be started."""


class _PendingSend:
    """One job's staged message waiting, inside its chain, for the chunk's request.

    Written by two threads under the chunk's condition: the chain's thread
    sets :attr:`message` (staged) or :attr:`finished` (its chain returned or
    raised, with :attr:`outcome`); the gathering thread calls
    :meth:`answer` once the request is back, or with an error when the
    chunk cannot be sent. Only the first answer counts.
    """

    def __init__(self) -> None:
        self.message: StagedMessage | None = None
        self.finished = False
        self.outcome: str | BaseException | None = None
        self.answered = threading.Event()
        self.result: EntryResult | BaseException = None

    def answer(self, result: EntryResult | BaseException) -> None:
        """Let the chain's innermost step return (or raise) ``result``."""
        if not self.answered.is_set():
            self.result = result
            self.answered.set()


def send_through_chains(
    group: NamedQueues, jobs: list[PreparedJob], sink: BatchSink
) -> list[Sent]:
    """Run the jobs' produce chains ten at a time on a pool of ten threads.

    Every job is staged once without middleware first, so a job that cannot
    be sent fails before anything is. Returns one result per job; a thread
    that cannot start fails the rest of the batch (EnqueueBatchError).
    """
    for prepared in jobs:
        stage(prepared, prepared.job, prepared.queue, rechecked=False)
    rechecked = rechecks_produce(group.middleware)
    results: list[Sent] = []
    workers = min(MAX_BATCH_ENTRIES, len(jobs))
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix="sqs-jobs-enqueue-many"
    ) as pool:
        for start in range(0, len(jobs), MAX_BATCH_ENTRIES):
            chunk = jobs[start : start + MAX_BATCH_ENTRIES]
            try:
                results.extend(
                    _send_chunk(group, sink, pool, chunk, results, rechecked)
                )
            except _NotStarted as exc:
                _not_started(results, len(jobs), exc)
    return results


def _not_started(results: list[Sent], total: int, error: _NotStarted) -> t.NoReturn:
    """Fail every job not sent yet with ``error``; raise the batch's error."""
    failed = (type(error.__cause__).__name__, str(error))
    results.extend([failed] * (total - len(results)))
    enqueued = [(i, r) for i, r in enumerate(results) if isinstance(r, str)]
    failures = [(i, r[0], r[1]) for i, r in enumerate(results) if isinstance(r, tuple)]
    raise EnqueueBatchError(enqueued, failures, total) from error.__cause__


def _send_chunk(
    group: NamedQueues,
    sink: BatchSink,
    pool: concurrent.futures.ThreadPoolExecutor,
    chunk: list[PreparedJob],
    earlier: list[Sent],
    rechecked: bool,
) -> list[Sent]:
    """Run one chunk's chains, send what they staged, return their results
    (``rechecked``: the chains may change a job, so it is encoded anew)."""
    ready = threading.Condition()
    pending = [_PendingSend() for _ in chunk]

    def run(waiting: _PendingSend, prepared: PreparedJob) -> None:
        """One job's chain, on a thread of the pool."""

        def send(job: Job) -> str:
            """The chain's innermost step: stage, wait for the request, report."""
            message = stage(prepared, job, prepared.queue, rechecked=rechecked)
            with ready:
                waiting.message = message
                ready.notify_all()
            waiting.answered.wait()
            result = waiting.result
            if isinstance(result, BaseException):
                raise result
            if not isinstance(result, str):
                raise EntryFailed(*(result or ("NotSent", "the sink did not send it")))
            report_sent(group, [message], [result], {})
            return result

        try:
            waiting.outcome = run_chain(group, prepared.job, send)
        except BaseException as exc:
            waiting.outcome = exc
        with ready:
            waiting.finished = True
            ready.notify_all()

    futures: list[concurrent.futures.Future[None]] = []
    try:
        for waiting, prepared in zip(pending, chunk, strict=True):
            chain = functools.partial(run, waiting, prepared)
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
            ready.wait_for(lambda: all(p.message or p.finished for p in pending))
        early = [
            p.outcome
            for p in pending
            if p.finished and isinstance(p.outcome, Exception)
        ]
        if early and not earlier:
            raise early[0]  # nothing was sent yet: the batch fails as a whole
        staged = [p for p in pending if p.message is not None]
        sent = sink.send_batch([t.cast("StagedMessage", p.message) for p in staged])
        for waiting, result in zip(staged, sent, strict=True):
            waiting.answer(result)
    finally:
        for waiting in pending:
            waiting.answer(SQSJobsError("not sent: another job of the batch failed"))
        concurrent.futures.wait(futures)
    return [_chain_result(p) for p in pending]


def _chain_result(waiting: _PendingSend) -> Sent:
    """What one job of the chunk came to, once its chain has returned.

    SQS's answer wins over the chain's (a middleware that raised after the
    send is logged); a chain that returned without sending gave its own.
    """
    result, outcome = waiting.result, waiting.outcome
    if isinstance(result, str | tuple):
        # Sent or refused by SQS, whatever a middleware did afterwards.
        if isinstance(outcome, BaseException) and isinstance(result, str):
            log.warning("produce_middleware_failed", error=repr(outcome))
        return result
    if isinstance(outcome, str):
        return outcome  # a middleware answered without sending
    return (type(outcome).__name__, str(outcome))
