"""Background jobs for Flask through Amazon SQS.

The queue engine (:mod:`flask_sqs_jobs.engine`) never imports Flask. To keep it
importable without Flask, this module imports the Flask extension lazily: the
first access to ``flask_sqs_jobs.SQSJobs`` loads it.
"""

from __future__ import annotations

import typing as t

from . import signals as signals
from ._task_enqueue import EnqueuedJob
from ._tasks import Task
from .engine import ConcurrencyLimit
from .engine import current_job
from .engine import DuplicateJobError
from .engine import EnqueueBatchError
from .engine import IdempotencyConflictError
from .engine import Job
from .engine import JobMiddleware
from .engine import JobWorker
from .engine import NonRetryableError
from .engine import QueueGroup
from .engine import RateLimit
from .engine import Retry
from .engine import RetryJob
from .engine import SQSJobsError
from .engine import SqsQueue

if t.TYPE_CHECKING:
    from ._extension import SQSJobs

__all__ = [
    "ConcurrencyLimit",
    "DuplicateJobError",
    "EnqueueBatchError",
    "EnqueuedJob",
    "IdempotencyConflictError",
    "Job",
    "JobMiddleware",
    "JobWorker",
    "NonRetryableError",
    "QueueGroup",
    "RateLimit",
    "Retry",
    "RetryJob",
    "SQSJobs",
    "SQSJobsError",
    "SqsQueue",
    "Task",
    "current_job",
    "signals",
]


def __getattr__(name: str) -> t.Any:
    if name == "SQSJobs":
        from ._extension import SQSJobs

        return SQSJobs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
