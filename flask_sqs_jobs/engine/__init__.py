"""The queue engine: SQS queues, jobs, middleware and the worker, without Flask.

Nothing in this package imports Flask, so it serves any Python process that
has a boto3 SQS client. Every module in it is private (its name starts with
an underscore); the names below are the engine's public API.
"""

from __future__ import annotations

from ._queue_group import QueueGroup
from .flow import ConcurrencyLimit
from .flow import RateLimit
from .model import current_job
from .model import EnqueueBatchError
from .model import Hooks
from .model import IdempotencyConflictError
from .model import Job
from .model import JobHandler
from .model import JobMiddleware
from .model import JSONObject
from .model import NonRetryableError
from .model import Outcome
from .model import QueueNotFoundError
from .model import Retry
from .model import RetryJob
from .model import SQSJobsError
from .model import UnknownQueueError
from .ops import HealthServer
from .sqs import LargePayloads
from .sqs import PayloadNotFound
from .sqs import SqsQueue
from .unique import DuplicateJobError
from .unique import use_unique_keys
from .worker import JobWorker
from .worker import pause
from .worker import run_worker

__all__ = [
    "ConcurrencyLimit",
    "DuplicateJobError",
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
    "RateLimit",
    "Retry",
    "RetryJob",
    "SQSJobsError",
    "SqsQueue",
    "UnknownQueueError",
    "current_job",
    "pause",
    "run_worker",
    "use_unique_keys",
]
