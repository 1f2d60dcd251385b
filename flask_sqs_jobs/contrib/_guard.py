"""What the tracing integrations share: vendor calls that cannot change an outcome.

A vendor SDK may fail anywhere (a bug, an incompatible version, a full buffer).
Every SDK call goes through :class:`Vendor`, which logs the failure and carries
on without the integration, and :func:`traced` calls ``call_next`` exactly
once, outside every guard, so the handler's own exception is re-raised
unchanged and a handler never runs twice.

:meta private:
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import re
import secrets
import typing as t

import structlog

from ..engine.model import Job
from ..engine.model import NonRetryableError
from ..engine.model import RetryJob

log = structlog.get_logger("flask_sqs_jobs.contrib")

P = t.ParamSpec("P")
T = t.TypeVar("T")
R = t.TypeVar("R")
R_contra = t.TypeVar("R_contra", contravariant=True)

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def missing_sdk(module: str, sdk: str, extra: str) -> ImportError:
    """Return the ImportError for an integration whose SDK cannot be imported."""
    return ImportError(
        f"{module} needs {sdk}, which could not be imported. Install it with:"
        f' pip install "flask-sqs-jobs[{extra}]"'
    )


class Vendor:
    """Calls into one vendor's SDK; a call that raises is logged and yields None."""

    def __init__(self, name: str) -> None:
        self.name = name

    def call(
        self, step: str, func: cabc.Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T | None:
        try:
            return func(*args, **kwargs)
        except Exception:
            log.warning(
                "integration_failed", integration=self.name, step=step, exc_info=True
            )
            return None


class Tracing(t.Protocol[R_contra]):
    """The vendor's work around one produce or consume call, once started."""

    def succeeded(self, result: R_contra) -> None:
        """``call_next`` returned ``result``."""

    def failed(self, error: Exception) -> None:
        """``call_next`` raised ``error``."""


def traced(
    vendor: Vendor,
    phase: str,
    job: Job,
    call_next: cabc.Callable[[Job], R],
    start: cabc.Callable[[Job, contextlib.ExitStack], Tracing[R]],
) -> R:
    """Run ``call_next(job)`` inside what ``start`` sets up, if it could.

    ``start`` enters its context managers on the given stack; the stack is
    closed (exits called without the exception, so no vendor context manager
    can swallow it) once the result or the error was reported.
    """
    stack = contextlib.ExitStack()
    tracing = vendor.call(f"{phase}_start", start, job, stack)
    if tracing is None:
        vendor.call(f"{phase}_end", stack.close)
    try:
        result = call_next(job)
    except BaseException as error:
        if tracing is not None:
            if isinstance(error, Exception):
                vendor.call(f"{phase}_error", tracing.failed, error)
            vendor.call(f"{phase}_end", stack.close)
        raise
    if tracing is not None:
        vendor.call(f"{phase}_result", tracing.succeeded, result)
        vendor.call(f"{phase}_end", stack.close)
    return result


def is_reported(error: Exception, *, report_non_retryable: bool) -> bool:
    """Whether a handler's exception is an error to report to the vendor.

    ``RetryJob`` asks for a later retry and is never one; ``NonRetryableError``
    (a job that cannot succeed) only when asked for.
    """
    if isinstance(error, RetryJob):
        return False
    return report_non_retryable or not isinstance(error, NonRetryableError)


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """Return (trace id, parent id) of a W3C ``traceparent``, or None."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match[1] == "0" * 32 or match[2] == "0" * 16:
        return None
    return match[1], match[2]


def as_trace_id(value: object) -> str | None:
    """Return ``value`` if it is a valid W3C trace id (32 hex digits), else None."""
    if not isinstance(value, str) or _TRACE_ID.match(value) is None:
        return None
    return None if value == "0" * 32 else value


def new_trace_id() -> str:
    """A random W3C trace id: 32 lower-case hex digits."""
    return secrets.token_hex(16)


def new_span_id() -> str:
    """A random W3C span id: 16 lower-case hex digits."""
    return secrets.token_hex(8)


def bind_trace(stack: contextlib.ExitStack | None, trace_id: str, span_id: str) -> None:
    """Add ``trace_id``/``span_id`` to the log context.

    With a stack (the producer side) they are bound until the stack closes;
    without (the consumer side, where each job runs in a context of its own)
    for the rest of the job, so ``job_finished`` carries them too.
    """
    if stack is None:
        structlog.contextvars.bind_contextvars(trace_id=trace_id, span_id=span_id)
    else:
        stack.enter_context(
            structlog.contextvars.bound_contextvars(trace_id=trace_id, span_id=span_id)
        )
