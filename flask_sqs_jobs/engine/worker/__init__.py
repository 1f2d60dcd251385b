"""The worker: receiving, leases, slots, the two phases of a job, shutdown.

:class:`JobWorker` wires the parts together; each part owns its state and
says in its docstring who calls it and under which lock. The eager queue
group and the AWS Lambda handler run jobs through the same
:class:`JobProcessing` (its :class:`JobRunner` and :class:`Settler`).
The exit statuses of the worker and the command line are defined here once.
"""

from __future__ import annotations

from ._delivery import Delivery
from ._heartbeat import Heartbeat
from ._heartbeat import Lease
from ._idempotent_run import JobGuard
from ._runner import run_until_signalled
from ._runner import run_worker
from ._running import JobRunner
from ._settling import Settler
from ._shutdown import pause
from ._shutdown import release_leases
from ._slots import JobProcessing
from ._slots import Processed
from ._worker import JobWorker

__all__ = [
    "Delivery",
    "Heartbeat",
    "JobGuard",
    "JobProcessing",
    "JobRunner",
    "JobWorker",
    "Lease",
    "Processed",
    "Settler",
    "pause",
    "release_leases",
    "run_until_signalled",
    "run_worker",
]
