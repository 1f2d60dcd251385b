"""Middleware: code that wraps enqueueing, polling and running jobs."""

from __future__ import annotations

import collections.abc as cabc
import threading
import typing as t

from ._job import Job

T = t.TypeVar("T")


class JobMiddleware:
    """Wrap the three moments of a job's life, Rack-style.

    Subclass and override any of the three methods; each must call
    ``call_next`` (once) to continue, and return what it returns. The first
    middleware in the list is the outermost. The defaults pass straight through.

    A middleware that injects trace headers sets :attr:`injects_trace_headers`
    to True; only one such middleware may be active in a process.
    """

    #: True for middleware that adds trace propagation headers on ``produce``.
    injects_trace_headers: t.ClassVar[bool] = False
    #: True for middleware whose ``produce`` leaves the job's type, payload and
    #: tags as they were (it may change headers, attributes, correlation
    #: fields): the payload's JSON from the checks is then reused instead of
    #: checked and serialised again after the chain.
    keeps_payload: t.ClassVar[bool] = False

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        """Wrap sending ``job``; ``call_next(job)`` sends it and returns its id."""
        return call_next(job)

    def poll(self, call_next: cabc.Callable[[], None]) -> None:
        """Wrap one polling cycle of the worker.

        Not calling ``call_next`` skips the cycle (nothing is received), which
        is how a middleware pauses a worker.
        """
        call_next()

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        """Wrap running the handler for ``job``.

        An exception raised here (or let through from ``call_next``) decides
        the outcome as if the handler had raised it.
        """
        call_next(job)


def compose_produce(
    middleware: cabc.Sequence[JobMiddleware], terminal: cabc.Callable[[Job], str]
) -> cabc.Callable[[Job], str]:
    """Return ``terminal`` wrapped by every middleware's ``produce``."""
    chain = terminal
    for item in reversed(middleware):
        chain = _bind_job_step(item.produce, chain)
    return chain


def compose_consume(
    middleware: cabc.Sequence[JobMiddleware], terminal: cabc.Callable[[Job], None]
) -> cabc.Callable[[Job], None]:
    """Return ``terminal`` wrapped by every middleware's ``consume``."""
    chain = terminal
    for item in reversed(middleware):
        chain = _bind_job_step(item.consume, chain)
    return chain


def compose_poll(
    middleware: cabc.Sequence[JobMiddleware], terminal: cabc.Callable[[], None]
) -> cabc.Callable[[], None]:
    """Return ``terminal`` wrapped by every middleware's ``poll``."""
    chain = terminal
    for item in reversed(middleware):
        chain = _bind_poll_step(item.poll, chain)
    return chain


def _bind_job_step(
    step: cabc.Callable[[Job, cabc.Callable[[Job], T]], T],
    call_next: cabc.Callable[[Job], T],
) -> cabc.Callable[[Job], T]:
    def call(job: Job) -> T:
        return step(job, call_next)

    return call


def _bind_poll_step(
    step: cabc.Callable[[cabc.Callable[[], None]], None],
    call_next: cabc.Callable[[], None],
) -> cabc.Callable[[], None]:
    def call() -> None:
        step(call_next)

    return call


#: The trace-injecting middleware types this process has enqueued with.
_trace_injectors: list[type[JobMiddleware]] = []
_trace_injectors_lock = threading.Lock()


def check_single_trace_injector(middleware: cabc.Sequence[JobMiddleware]) -> None:
    """Raise ``ValueError`` if more than one trace-injecting middleware is in use.

    The rule holds for the whole process: the first enqueue through a
    trace-injecting middleware registers its type, and an enqueue through a
    middleware of another type (another queue group, another app) raises,
    naming both. The same type again, in any number of groups, is fine; so is
    a subclass of the registered type, or the type of a registered subclass.
    """
    injectors = [type(m) for m in middleware if m.injects_trace_headers]
    if len(injectors) > 1:
        raise ValueError(
            "only one trace-injecting middleware may be active per process; got"
            f" {', '.join(kind.__name__ for kind in injectors)}. Keep the one for"
            " your tracing vendor."
        )
    if not injectors:
        return
    (kind,) = injectors
    with _trace_injectors_lock:
        for known in _trace_injectors:
            if issubclass(kind, known) or issubclass(known, kind):
                return
        if _trace_injectors:
            raise ValueError(
                "only one trace-injecting middleware may be active per process;"
                f" {_qualified(_trace_injectors[0])} is already in use and"
                f" {_qualified(kind)} was asked to enqueue. Use the same tracing"
                " middleware in every queue group and app of the process."
            )
        _trace_injectors.append(kind)


def _qualified(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def reset_trace_injectors() -> None:
    """Forget which trace-injecting middleware this process has enqueued with.

    For test suites that try several tracing middlewares in one process; see
    :func:`flask_sqs_jobs.testing.reset_tracing`.
    """
    with _trace_injectors_lock:
        _trace_injectors.clear()
