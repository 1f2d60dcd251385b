"""Handlers: the functions jobs run, plain or ``async def``."""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import dataclasses
import inspect
import threading
import typing as t

from ._job import JSONObject
from ._limits import is_finite_number
from ._retry import Retry

#: A handler takes the job's payload; it may be a coroutine function.
HandlerFunc: t.TypeAlias = cabc.Callable[[JSONObject], object]
#: Returns a job's idempotency key from its payload.
KeyFunc: t.TypeAlias = cabc.Callable[[JSONObject], str]

#: How long a completed idempotency key is remembered by default (a day).
DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86_400
#: ``idempotency_scope``: keys of this job type only (the default), or keys
#: shared with every job type whose scope is global.
JOB_TYPE_SCOPE = "job_type"
GLOBAL_SCOPE = "global"
IDEMPOTENCY_SCOPES = (JOB_TYPE_SCOPE, GLOBAL_SCOPE)


@dataclasses.dataclass(frozen=True)
class JobHandler:
    """A handler with per-job-type settings.

    :param func: the function (or ``async def`` coroutine function) to call
        with the job's payload.
    :param max_runtime_seconds: overrides the queue's ``max_runtime_seconds``
        for this job type.
    :param retry: the job type's :class:`Retry` policy, overriding the queue's
        ``retry_backoff_seconds``.
    :param idempotent: run each key at most once (the worker needs
        ``idempotency_keys``); the key is the job id unless ``idempotency_key``
        is given.
    :param idempotency_key: returns the key from the payload; implies
        ``idempotent``.
    :param idempotency_ttl_seconds: how long a completed key is remembered.
    :param idempotency_scope: ``"job_type"`` (keys are this job type's own: the
        same job id or key under another job type is another key) or
        ``"global"`` (one key space shared by every global-scope job type).
    :param limits: the ``RateLimit`` and ``ConcurrencyLimit`` values of
        :mod:`flask_sqs_jobs.engine.flow` the job type's starts obey (the
        worker needs a store's ``limits()``).
    """

    func: HandlerFunc
    max_runtime_seconds: float | None = None
    retry: Retry | None = None
    idempotent: bool = False
    idempotency_key: KeyFunc | None = None
    idempotency_ttl_seconds: float = DEFAULT_IDEMPOTENCY_TTL_SECONDS
    idempotency_scope: str = JOB_TYPE_SCOPE
    limits: tuple[t.Any, ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise TypeError(f"a handler must be callable; got {self.func!r}")
        limit = self.max_runtime_seconds
        if limit is not None and (not is_finite_number(limit) or limit <= 0):
            raise ValueError(
                "max_runtime_seconds must be a positive, finite number or None;"
                f" got {limit!r}"
            )
        if self.retry is not None and not isinstance(self.retry, Retry):
            raise TypeError(f"retry must be a Retry or None; got {self.retry!r}")
        check_idempotency(
            self.idempotency_key, self.idempotency_ttl_seconds, self.idempotency_scope
        )
        if self.idempotency_key is not None:
            object.__setattr__(self, "idempotent", True)


def check_idempotency(
    key: object, ttl_seconds: object, scope: object = JOB_TYPE_SCOPE
) -> None:
    """Refuse a key function that is not callable, a bad time to live or scope."""
    if not isinstance(scope, str) or scope not in IDEMPOTENCY_SCOPES:
        raise ValueError(
            f"idempotency_scope must be {JOB_TYPE_SCOPE!r} (keys of this job type"
            f" only) or {GLOBAL_SCOPE!r} (keys shared across job types); got"
            f" {scope!r}"
        )
    if key is not None and not callable(key):
        raise TypeError(
            "idempotency_key must be a function of the payload returning a str;"
            f" got {key!r}"
        )
    if not is_finite_number(ttl_seconds) or t.cast(float, ttl_seconds) <= 0:
        raise ValueError(
            "idempotency_ttl_seconds must be a positive, finite number of seconds"
            f" (how long a completed key is remembered); got {ttl_seconds!r}"
        )


def as_job_handler(handler: HandlerFunc | JobHandler) -> JobHandler:
    return handler if isinstance(handler, JobHandler) else JobHandler(handler)


_loops = threading.local()


def call_handler(func: HandlerFunc, payload: JSONObject) -> object:
    """Call ``func(payload)`` and return what it returns.

    A coroutine it returns is run to completion (and its value returned), on
    an event loop owned by the calling thread and kept for the thread's next
    jobs.
    """
    result = func(payload)
    if inspect.isawaitable(result):
        runner: asyncio.Runner | None = getattr(_loops, "runner", None)
        if runner is None:
            runner = _loops.runner = asyncio.Runner()
        return runner.run(_await(result))
    return result


async def _await(awaitable: cabc.Awaitable[object]) -> object:
    return await awaitable


def close_thread_loop() -> None:
    """Close the calling thread's event loop, if a coroutine handler made one."""
    runner: asyncio.Runner | None = getattr(_loops, "runner", None)
    if runner is not None:
        _loops.runner = None
        runner.close()
