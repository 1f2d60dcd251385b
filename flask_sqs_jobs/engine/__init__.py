"""The queue engine: SQS queues, jobs, middleware and the worker, without Flask.

Nothing in this package imports Flask, so it serves any Python process that
has a boto3 SQS client. Every module in it is private (its name starts with
an underscore); the names below are the engine's public API.
"""

from __future__ import annotations

from ._current import current_job
from ._exceptions import EnqueueBatchError
from ._exceptions import IdempotencyConflictError
from ._exceptions import NonRetryableError
from ._exceptions import QueueNotFoundError
from ._exceptions import RetryJob
from ._exceptions import SQSJobsError
from ._exceptions import UnknownQueueError
from ._handlers import JobHandler
from ._health import HealthServer
from ._hooks import Hooks
from ._job import Job
from ._job import JSONObject
from ._large_payloads import LargePayloads
from ._large_payloads import PayloadNotFound
from ._middleware import JobMiddleware
from ._outcome import Outcome
from ._queue import SqsQueue
from ._queue_group import QueueGroup
from ._retry import Retry
from ._runner import run_worker
from ._worker import JobWorker
from ._worker import pause

__all__ = [
    "EnqueueBatchError",
    "HealthServer",
    "Hooks",
    "IdempotencyConflictError",
    "JSONObject",
    "Job",
    "JobHandler",
    "JobMiddleware",
    "JobWorker",
    "LargePayloads",
    "NonRetryableError",
    "Outcome",
    "PayloadNotFound",
    "QueueGroup",
    "QueueNotFoundError",
    "Retry",
    "RetryJob",
    "SQSJobsError",
    "SqsQueue",
    "UnknownQueueError",
    "current_job",
    "pause",
    "run_worker",
]
