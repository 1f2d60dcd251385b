"""``current_job.set_progress``: what a handler may report, checked once here.

The job's runtime hands a checked report to whoever records jobs (the
``job_progress`` hook); this module only checks and shapes it.
"""

from __future__ import annotations

import collections.abc as cabc
import math
import typing as t

import structlog

from .untrusted import loggable_text

log = structlog.get_logger(__name__)

#: Characters of a progress message kept.
MAX_PROGRESS_MESSAGE = 500

#: Takes a checked fraction (0 to 1) and message (escaped, cut), for one job.
ProgressSink: t.TypeAlias = cabc.Callable[[float, str | None], None]


def check_progress(fraction: object, message: object) -> tuple[float, str | None]:
    """Return ``fraction`` as a float and ``message`` made loggable.

    :raises ValueError: ``fraction`` is not a finite number from 0 to 1.
    :raises TypeError: ``message`` is neither a str nor None.
    """
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
    return float(fraction), shown


def progress_not_recorded(fraction: float) -> None:
    """Say (at debug level) that a report went nowhere: nothing records jobs."""
    log.debug("job_progress_not_recorded", progress=fraction, reason="no records")
