"""The worker: receiving, leases, slots, the two phases of a job, shutdown."""

from __future__ import annotations

from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._heartbeat import Lease
from ._idempotent_run import JobGuard
from ._runner import run_until_signalled
from ._runner import run_worker
from ._running import JobRunner
from ._services import running
from ._services import WorkerService
from ._settling import Settler
from ._worker import JobWorker
from ._worker import pause
from ._worker_counts import WorkerCounts

__all__ = [
    "WorkerCounts",
    "Delivery",
    "Heartbeat",
    "JobGuard",
    "JobRunner",
    "JobWorker",
    "Lease",
    "Settler",
    "WorkerService",
    "pause",
    "run_until_signalled",
    "run_worker",
    "running",
]
