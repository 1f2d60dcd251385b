"""Captured structlog events with processors run first, on every structlog the
project supports (``structlog.testing.capture_logs`` takes processors only
from 25.5 on; the floor is older)."""

from __future__ import annotations

import collections.abc as cabc
import contextlib

import structlog
from structlog.testing import LogCapture
from structlog.typing import EventDict
from structlog.typing import Processor


@contextlib.contextmanager
def capture_logs(
    processors: cabc.Iterable[Processor] = (),
) -> cabc.Iterator[list[EventDict]]:
    """Every event logged meanwhile, after ``processors``, in a list."""
    capture = LogCapture()
    # The same list instance throughout: bound loggers hold references to it.
    configured = structlog.get_config()["processors"]
    saved = configured.copy()
    try:
        configured.clear()
        configured.extend([*processors, capture])
        structlog.configure(processors=configured)
        yield capture.entries
    finally:
        configured.clear()
        configured.extend(saved)
        structlog.configure(processors=configured)
