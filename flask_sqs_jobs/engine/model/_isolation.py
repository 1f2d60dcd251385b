"""One way to call code that watches the engine without letting it steer.

Hooks, signal receivers and vendor observers may fail anywhere; a failure is
logged and never changes a job's outcome or stops the worker. The caller gets
the exception back, to report it further (``worker_error``, kind ``"hook"``).
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import structlog

log = structlog.get_logger("flask_sqs_jobs.engine")

P = t.ParamSpec("P")


def call_isolated(
    event: str,
    fields: cabc.Mapping[str, object],
    func: cabc.Callable[P, object],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> Exception | None:
    """Call ``func``; if it raises, log ``event`` with ``fields`` and the traceback.

    Returns what it raised (None when it returned).
    """
    try:
        func(*args, **kwargs)
    except Exception as exc:
        log.exception(event, **fields)
        return exc
    return None


def call_hook(
    name: str, func: cabc.Callable[P, object], /, *args: P.args, **kwargs: P.kwargs
) -> Exception | None:
    """Call the hook ``name``; a failure is logged as ``hook_failed`` and returned."""
    return call_isolated("hook_failed", {"hook": name}, func, *args, **kwargs)
