"""The queue engine: SQS queues, jobs, middleware and the worker, without Flask.

Nothing in this package imports Flask, so it serves any Python process that
has a boto3 SQS client.
"""

from __future__ import annotations

from .current import current_job
from .exceptions import EnqueueBatchError
from .exceptions import NonRetryableError
from .exceptions import RetryJob
from .exceptions import SQSJobsError
from .exceptions import UnknownQueueError
from .handlers import JobHandler
from .hooks import Hooks
from .job import Job
from .job import JSONObject
from .middleware import JobMiddleware
from .outcome import Outcome
from .queue import SqsQueue
from .queue_group import QueueGroup
from .runner import run_worker
from .worker import JobWorker

__all__ = [
    "EnqueueBatchError",
    "Hooks",
    "JSONObject",
    "Job",
    "JobHandler",
    "JobMiddleware",
    "JobWorker",
    "NonRetryableError",
    "Outcome",
    "QueueGroup",
    "RetryJob",
    "SQSJobsError",
    "SqsQueue",
    "UnknownQueueError",
    "current_job",
    "run_worker",
]
