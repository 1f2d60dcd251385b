"""Sinks: what becomes of a staged message, once the produce pipeline is done with it.

The pipeline (:mod:`._pipeline`) owns everything a job goes through before
its message exists and the ``job_enqueued`` report after; a sink owns only
the step between, as an httpx transport owns only sending the request its
client built. There are two kinds:

- a :class:`Sink` takes one message at a time, inside that job's produce
  chain: :class:`SqsSink` (SendMessage), the eager sink (runs the job) and
  the outbox's (inserts a row);
- a :class:`BatchSink` takes a list and answers for each entry:
  :class:`~._batch_sink.SqsBatchSink` (SendMessageBatch), which
  ``enqueue_many``, the outbox relay and the send after commit share.
"""

from __future__ import annotations

import typing as t

from ..sqs import send as send_message

if t.TYPE_CHECKING:
    from ._prepare import PreparedJob
    from ._staging import StagedMessage

#: What a batch sink answers for one entry: its MessageId, SQS's ``(code,
#: message)`` for an entry refused, or None for one it did not try (a FIFO
#: group that failed earlier in the same pass).
EntryResult: t.TypeAlias = str | tuple[str, str] | None


class Sink:
    """Takes one staged message at a time; the base of every single-message sink.

    Contract: the pipeline calls, for one enqueue call and in this order,
    :meth:`admit` for every job before any produce chain runs, then per job,
    inside its chain (in the caller's thread), :meth:`send`, the
    ``job_enqueued`` report (only when :attr:`enqueues` is True), and
    :meth:`sent`; finally :meth:`finish` once every chain has returned.
    An exception from any of them ends the call and propagates to the
    caller; :meth:`finish` is then not called. A sink holds no lock of the
    pipeline's; one that keeps state for a call (the outbox's rows) is made
    for that call.
    """

    #: True: a message is on its way once :meth:`send` returns (on its queue,
    #: or about to run in :meth:`sent`), so the pipeline reports
    #: ``job_enqueued`` for it. False: the sink holds it (the outbox), and
    #: whoever sends it later reports it, through :func:`~._pipeline.deliver`.
    enqueues: t.ClassVar[bool] = True
    #: Fields the ``job_enqueued`` line carries besides the job's own.
    log_fields: t.ClassVar[t.Mapping[str, object]] = {}
    #: The database session unique jobs' keys are taken in (the outbox's:
    #: the caller's transaction), or None: each key is a write of its own.
    key_session: t.Any = None
    #: True: the sink keeps a debounced job until it is due (the outbox).
    debounces: t.ClassVar[bool] = False

    def admit(self, prepared: PreparedJob) -> PreparedJob:
        """Refuse or adjust a job before any chain of the call runs.

        The default takes it as it is; the eager sink refuses a job type
        without a handler and drops delays.
        """
        return prepared

    def send(self, message: StagedMessage) -> str:
        """Hand ``message`` on; return what ``enqueue`` returns (its MessageId,
        or the outbox's job id). Raising fails this job (and, in a batch, the
        call)."""
        raise NotImplementedError

    def sent(self, message: StagedMessage, message_id: str) -> None:
        """After the report, still inside the job's chain: the eager sink runs
        the job here, so its signals follow ``job_enqueued``."""

    def finish(self) -> None:
        """Every chain of the call returned: the outbox writes its rows here."""


class SqsSink(Sink):
    """SendMessage, one job at a time: ``QueueGroup.enqueue``'s sink.

    Sends to the message's queue (the one the job names when its chain
    returns: middleware may name another queue of the group), through S3 when
    the queue offloads large payloads. Stateless: one instance serves every
    call and thread.
    """

    def send(self, message: StagedMessage) -> str:
        return send_message(message.queue, message.params)


class BatchSink:
    """Takes a list of staged messages and answers for each entry.

    Contract: called by the pipeline with the messages of one queue, from
    the caller's thread (or, with produce middleware, from the thread
    that gathered one chunk's chains); it answers with one
    :data:`EntryResult` per message, in order, and never raises for a
    refused entry: a request that fails answers every entry of it with
    the error. The pipeline reports the entries that have a MessageId.
    """

    key_session: t.Any = None
    debounces: t.ClassVar[bool] = False

    def send_batch(self, messages: t.Sequence[StagedMessage]) -> list[EntryResult]:
        """Send ``messages``; their MessageIds or errors, in order."""
        raise NotImplementedError
