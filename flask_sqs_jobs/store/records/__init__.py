"""Job records and live workers: written from the engine's hooks, off the jobs' path."""

from __future__ import annotations

from ._presence import presence_of
from ._presence import STALE_AFTER_SECONDS
from ._reading import cancel
from ._reading import find_jobs
from ._reading import get_job
from ._recording import recorder_of
from ._recording import with_records
from ._retrying import retry_records
from ._retrying import RETRYABLE
from ._retrying import RetryReport
from ._retrying import why_not_retryable

__all__ = [
    "STALE_AFTER_SECONDS",
    "cancel",
    "find_jobs",
    "get_job",
    "presence_of",
    "recorder_of",
    "RETRYABLE",
    "RetryReport",
    "retry_records",
    "why_not_retryable",
    "with_records",
]
