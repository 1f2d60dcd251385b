"""Producing: one pipeline from a job's arguments to a sink.

A job is prepared once (:func:`prepare_job`, :func:`prepare_jobs`: the only
job-spec reader, the only place a :class:`Job` is checked and built), then
:func:`produce` runs it through the ``produce`` middleware, stages its
message and hands it to a sink, reporting ``job_enqueued`` once it is on
its way. Sinks differ only in what they do with the staged message:

- :class:`SqsSink`: SendMessage (``QueueGroup.enqueue``);
- :class:`SqsBatchSink`: SendMessageBatch, in requests of ten within the
  queue's size limit (``enqueue_many``, the outbox relay, the send after
  commit, through :func:`deliver`);
- :class:`EagerSink`: runs the job through the worker's runner and settler
  (``SQS_JOBS_EAGER``, on :class:`EagerQueue`\\ s);
- the outbox's row sink (in :mod:`flask_sqs_jobs.store.outbox`), a
  :class:`Sink` subclass that inserts a row.

The worker never imports this package; this package imports the worker
(the eager sink runs jobs with it).
"""

from __future__ import annotations

from ._batch_sink import SqsBatchSink
from ._checks import check_json
from ._checks import SendOptions
from ._eager_sink import eager_queues
from ._eager_sink import EagerQueue
from ._eager_sink import EagerSink
from ._enqueue import enqueue
from ._enqueue import enqueue_many
from ._enqueue import prepare_batch
from ._enqueue import target_queue
from ._pipeline import deliver
from ._pipeline import produce
from ._prepare import JobSpec
from ._prepare import prepare_job
from ._prepare import prepare_jobs
from ._prepare import PreparedJob
from ._prepare import read_job_specs
from ._send_buffer import DEFAULT_WINDOW_SECONDS
from ._send_buffer import SendBuffer
from ._sinks import BatchSink
from ._sinks import EntryResult
from ._sinks import Sink
from ._sinks import SqsSink
from ._staging import StagedMessage
from ._staging import stored_message

__all__ = [
    "BatchSink",
    "DEFAULT_WINDOW_SECONDS",
    "EagerQueue",
    "EagerSink",
    "EntryResult",
    "JobSpec",
    "PreparedJob",
    "SendOptions",
    "SendBuffer",
    "Sink",
    "SqsBatchSink",
    "SqsSink",
    "StagedMessage",
    "check_json",
    "deliver",
    "eager_queues",
    "enqueue",
    "enqueue_many",
    "prepare_job",
    "prepare_batch",
    "prepare_jobs",
    "produce",
    "read_job_specs",
    "stored_message",
    "target_queue",
]
