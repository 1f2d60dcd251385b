"""Process recycling for ``flask sqs-worker``: ``--max-jobs``, ``--max-memory-mb``,
``--max-age``.

A worker process that reaches a limit stops receiving and goes through the
normal graceful stop (running jobs finish, held messages are released). A
single process then exits 0; a child of ``--processes`` exits
:data:`EXIT_RECYCLED` and its supervisor replaces it without backoff.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import math
import random
import resource
import sys
import threading
import time
import typing as t

import click
import structlog

from ..engine.model import Hooks
from ._common import FiniteFloatRange

if t.TYPE_CHECKING:
    from ..engine.model import Job

log = structlog.get_logger(__name__)

#: ``--max-age`` is drawn once per process within +-this share of the value,
#: so a fleet started together does not restart together.
AGE_JITTER = 0.10

#: The RSS is read at most this often: the check runs before every polling
#: cycle, which with one slot is every job.
RSS_CHECK_SECONDS = 1.0

F = t.TypeVar("F", bound=cabc.Callable[..., t.Any])


def recycling_options(command: F) -> F:
    """Add ``--max-jobs``, ``--max-memory-mb`` and ``--max-age`` to ``command``."""
    options = [
        click.option(
            "--max-jobs",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            envvar="FLASK_SQS_WORKER_MAX_JOBS",
            help="Recycle the process after it started N jobs. Default: never.",
        ),
        click.option(
            "--max-memory-mb",
            type=click.IntRange(min=1),
            default=None,
            metavar="MIB",
            envvar="FLASK_SQS_WORKER_MAX_MEMORY_MB",
            help="Recycle the process once its RSS is above this many MiB."
            " Default: never.",
        ),
        click.option(
            "--max-age",
            type=FiniteFloatRange(min=0, min_open=True),
            default=None,
            metavar="SECONDS",
            envvar="FLASK_SQS_WORKER_MAX_AGE",
            help="Recycle the process after running this long (+-10 % jitter)."
            " Default: never.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@dataclasses.dataclass(frozen=True)
class RecycleLimits:
    """When a worker process retires itself; None for no limit."""

    max_jobs: int | None = None
    max_memory_mb: int | None = None
    max_age: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))


def rss_mb() -> float:
    """This process's resident set size now, in MiB.

    From ``/proc/self/statm`` on Linux; elsewhere the peak RSS
    (``getrusage``), which never falls but still catches a leak.
    """
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * resource.getpagesize() / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Bytes on macOS, KiB elsewhere.
        return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class Recycler(Hooks):
    """The worker's ``should_stop`` and a hook counting started jobs.

    Called before each polling cycle: returns True (once a limit is reached,
    and ever after) and logs ``worker_recycled`` with the reason.

    :param clock: monotonic seconds; :param rss: the current RSS in MiB;
    :param jitter: a number in [-1, 1] scaling :data:`AGE_JITTER` (injected
        by tests).
    """

    def __init__(
        self,
        limits: RecycleLimits,
        *,
        clock: cabc.Callable[[], float] = time.monotonic,
        rss: cabc.Callable[[], float] = rss_mb,
        jitter: cabc.Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self._limits = limits
        self._clock = clock
        self._rss = rss
        self._started_at = clock()
        self._rss_checked_at = -math.inf
        self.max_age = (
            None
            if limits.max_age is None
            else limits.max_age * (1 + AGE_JITTER * jitter())
        )
        self._lock = threading.Lock()
        self.jobs = 0
        #: Why the process recycles (``max_jobs``, ``max_memory``, ``max_age``).
        self.reason: str | None = None

    def job_started(self, job: Job) -> None:
        with self._lock:
            self.jobs += 1

    def __call__(self) -> bool:
        if self.reason is not None:
            return True
        reason, details = self._reached()
        if reason is None:
            return False
        self.reason = reason
        log.info("worker_recycled", reason=reason, jobs=self.jobs, **details)
        return True

    def _reached(self) -> tuple[str | None, dict[str, t.Any]]:
        limits = self._limits
        if limits.max_jobs is not None and self.jobs >= limits.max_jobs:
            return "max_jobs", {"max_jobs": limits.max_jobs}
        now = self._clock()
        if (
            limits.max_memory_mb is not None
            and now - self._rss_checked_at >= RSS_CHECK_SECONDS
        ):
            self._rss_checked_at = now
            rss = self._rss()
            if rss > limits.max_memory_mb:
                return "max_memory", {
                    "rss_mb": round(rss, 1),
                    "max_memory_mb": limits.max_memory_mb,
                }
        if self.max_age is not None:
            age = now - self._started_at
            if age >= self.max_age:
                return "max_age", {"age_seconds": round(age, 1)}
        return None, {}
