"""What every job store offers, and the records it keeps."""

from __future__ import annotations

from ._base import JobStore
from ._cancellations import Cancellations
from ._cancellations import MAX_READ_BATCH
from ._cancellations import TOMBSTONE_RETENTION_SECONDS
from ._records import CANCELLED
from ._records import DEAD_LETTERED
from ._records import DEFERRED
from ._records import DUPLICATE
from ._records import EXPIRED
from ._records import FAILED
from ._records import FINAL
from ._records import in_rounds
from ._records import JobEvent
from ._records import JobRecord
from ._records import JobRecords
from ._records import JobSearch
from ._records import LIMITED
from ._records import merge_events
from ._records import minute_of
from ._records import MinuteCount
from ._records import PROGRESS
from ._records import QUEUED
from ._records import RefusedWrite
from ._records import RESTARTING
from ._records import RETRYING
from ._records import RUNNING
from ._records import STATUS_RANK
from ._records import STATUSES
from ._records import StatusFilter
from ._records import SUCCEEDED
from ._search import check_status
from ._search import job_search
from ._search import MAX_SEARCH_LIMIT
from ._workers import WorkerRecord
from ._workers import WorkerRegistry

__all__ = [
    "CANCELLED",
    "Cancellations",
    "EXPIRED",
    "FINAL",
    "MAX_READ_BATCH",
    "TOMBSTONE_RETENTION_SECONDS",
    "in_rounds",
    "RefusedWrite",
    "DEAD_LETTERED",
    "DEFERRED",
    "DUPLICATE",
    "LIMITED",
    "FAILED",
    "JobEvent",
    "JobRecord",
    "JobRecords",
    "JobStore",
    "MinuteCount",
    "PROGRESS",
    "QUEUED",
    "RESTARTING",
    "RETRYING",
    "RUNNING",
    "STATUS_RANK",
    "SUCCEEDED",
    "STATUSES",
    "StatusFilter",
    "WorkerRecord",
    "WorkerRegistry",
    "check_status",
    "JobSearch",
    "job_search",
    "MAX_SEARCH_LIMIT",
    "merge_events",
    "minute_of",
]
