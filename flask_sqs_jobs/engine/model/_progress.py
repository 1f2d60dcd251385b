"""``current_job.set_progress``: checked here, written by whoever records jobs."""

from __future__ import annotations

import collections.abc as cabc
import math
import typing as t

import structlog

from ._untrusted import loggable_text

if t.TYPE_CHECKING:
    from ._job import Job

log = structlog.get_logger(__name__)

#: Characters of a progress message kept.
MAX_PROGRESS_MESSAGE = 500

ProgressReporter: t.TypeAlias = cabc.Callable[["Job", float, str | None], None]
_ATTRIBUTE = "_progress_reporter"


def set_reporter(job: Job, reporter: ProgressReporter) -> None:
    """Have ``job``'s ``set_progress`` calls go to ``reporter``."""
    setattr(job, _ATTRIBUTE, reporter)


def report_progress(job: Job, fraction: float, message: str | None) -> None:
    """Check ``fraction`` and ``message``, then hand them to the job's reporter."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not math.isfinite(fraction)
        or not 0 <= fraction <= 1
    ):
        raise ValueError(
            f"set_progress takes a fraction from 0 to 1 (e.g. 0.25); got {fraction!r}"
        )
    if message is not None and not isinstance(message, str):
        raise TypeError(f"a progress message must be a str or None; got {message!r}")
    shown = None if message is None else loggable_text(message, MAX_PROGRESS_MESSAGE)
    reporter: ProgressReporter | None = getattr(job, _ATTRIBUTE, None)
    if reporter is None:
        log.debug("job_progress_not_recorded", progress=fraction, reason="no records")
        return
    reporter(job, float(fraction), shown)
