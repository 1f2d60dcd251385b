"""Periodic jobs: declarations, cron, the embedded scheduler, claims, EventBridge."""

from __future__ import annotations

from ._eventbridge import apply
from ._eventbridge import plan
from ._eventbridge import scheduler_client
from ._schedule import declare
from ._schedule import Enqueuer
from ._schedule import job_type_of
from ._schedule import Schedule
from ._scheduler import check_scheduling
from ._scheduler import claims_for
from ._scheduler import scheduler_service
from ._scheduler import SchedulingError

__all__ = [
    "Enqueuer",
    "Schedule",
    "SchedulingError",
    "apply",
    "check_scheduling",
    "claims_for",
    "declare",
    "job_type_of",
    "plan",
    "scheduler_client",
    "scheduler_service",
]
