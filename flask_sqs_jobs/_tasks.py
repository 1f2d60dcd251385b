"""Tasks: a handler whose function takes the payload's keys as keyword arguments.

``@jobs.task`` registers the handler and returns a :class:`Task`, which calls
the function as before and adds typed ``enqueue`` methods: a type checker sees
the function's parameters on them (PEP 612).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import inspect
import typing as t

from ._task_enqueue import EnqueueOptions
from ._task_enqueue import Sender
from .engine.flow import Limit
from .engine.model import HandlerFunc
from .engine.model import JSONObject
from .engine.model import NonRetryableError
from .engine.model import Retry
from .engine.producing import check_json

if t.TYPE_CHECKING:
    from ._jobs_facade import JobsFacade

P = t.ParamSpec("P")
R = t.TypeVar("R")


class Task(Sender[P, R]):
    """A function registered as a job type's handler, by ``@jobs.task``.

    Calling the task calls the function. The job's payload holds its keyword
    arguments, so they must be JSON values (ids, not objects).
    """

    # Copied from the function by functools.update_wrapper.
    __name__: str
    __qualname__: str
    __wrapped__: cabc.Callable[P, R]

    def __init__(
        self,
        jobs: JobsFacade,
        func: cabc.Callable[P, R],
        *,
        queue: str,
        name: str,
        retry: Retry | None,
        idempotent: bool,
        max_runtime_seconds: float | None,
    ) -> None:
        self.jobs = jobs
        self.func = func
        #: The job type.
        self.name = name
        self.queue = queue
        self.retry = retry
        self.idempotent = idempotent
        self.max_runtime_seconds = max_runtime_seconds
        self.signature = _keyword_signature(func, name)
        self._task = self
        self._options = EnqueueOptions(queue=queue)
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name!r} queue={self.queue!r}>"

    def build_payload(
        self,
        args: tuple[object, ...],
        kwargs: cabc.Mapping[str, object],
        *,
        partial: bool = False,
    ) -> JSONObject:
        """Check enqueue arguments against the signature and JSON; the payload.

        ``partial``: arguments may be missing (a signature's, which a
        workflow completes).
        """
        if args:
            raise TypeError(
                f"task {self.name!r} takes keyword arguments only at enqueue (they"
                f" become the payload's keys); got {len(args)} positional. Call"
                f" {self.name}.enqueue(name=value, ...)"
            )
        try:
            bind = self.signature.bind_partial if partial else self.signature.bind
            bind(**kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: {exc}") from None
        payload = dict(kwargs)
        check_json(f"the arguments of task {self.name!r}", payload)
        return payload

    def _handler_func(self) -> HandlerFunc:
        """The handler to register: the payload's keys as keyword arguments."""
        func: cabc.Callable[..., t.Any] = self.func
        signature, name = self.signature, self.name

        def arguments(payload: JSONObject) -> JSONObject:
            try:
                signature.bind(**payload)
            except TypeError as exc:
                # Another producer's payload: no retry makes it fit.
                raise NonRetryableError(
                    f"the payload does not fit task {name!r}: {exc}"
                ) from None
            return payload

        if inspect.iscoroutinefunction(func):

            async def run_async(payload: JSONObject) -> object:
                return await func(**arguments(payload))

            return _named(run_async, func)

        def run(payload: JSONObject) -> object:
            return func(**arguments(payload))

        return _named(run, func)


class TaskRegistry:
    """The ``task`` decorator of :class:`~flask_sqs_jobs.SQSJobs`."""

    @t.overload
    def task(self, func: cabc.Callable[P, R], /) -> Task[P, R]: ...

    @t.overload
    def task(
        self,
        func: None = None,
        /,
        *,
        queue: str = "default",
        name: str | None = None,
        retry: Retry | None = None,
        idempotent: bool = False,
        max_runtime_seconds: float | None = None,
        limits: cabc.Sequence[Limit] | None = None,
    ) -> cabc.Callable[[cabc.Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        func: cabc.Callable[P, R] | None = None,
        /,
        *,
        queue: str = "default",
        name: str | None = None,
        retry: Retry | None = None,
        idempotent: bool = False,
        max_runtime_seconds: float | None = None,
        limits: cabc.Sequence[Limit] | None = None,
    ) -> Task[P, R] | cabc.Callable[[cabc.Callable[P, R]], Task[P, R]]:
        """Register the decorated function as a task: see :class:`Task`.

        The function takes the payload's keys as keyword arguments; it may be
        ``async def``. ``@jobs.task`` alone takes every default.

        :param queue: the logical queue its jobs go to.
        :param name: the job type (default: the function's ``__name__``).
        :param retry: its :class:`~flask_sqs_jobs.Retry` policy.
        :param idempotent: run each job id at most once (needs a store).
        :param max_runtime_seconds: overrides the queue's limit for this task.
        :param limits: :class:`~flask_sqs_jobs.RateLimit` and
            :class:`~flask_sqs_jobs.ConcurrencyLimit` values its starts obey
            across every worker process (needs a store).
        """

        def decorator(func: cabc.Callable[P, R]) -> Task[P, R]:
            return make_task(
                t.cast("JobsFacade", self),
                func,
                queue=queue,
                name=name,
                retry=retry,
                idempotent=idempotent,
                max_runtime_seconds=max_runtime_seconds,
                limits=limits,
            )

        return decorator if func is None else decorator(func)


def make_task(
    jobs: JobsFacade,
    func: cabc.Callable[P, R],
    *,
    queue: str,
    name: str | None,
    retry: Retry | None,
    idempotent: bool,
    max_runtime_seconds: float | None,
    limits: cabc.Sequence[Limit] | None = None,
) -> Task[P, R]:
    """Build the :class:`Task` of ``func`` and register its handler on ``jobs``."""
    if not callable(func):
        raise TypeError(f"@jobs.task decorates a function; got {func!r}")
    if not isinstance(queue, str) or not queue:
        raise ValueError(f"queue must be a non-empty str; got {queue!r}")
    job_type = getattr(func, "__name__", None) if name is None else name
    if not isinstance(job_type, str) or not job_type:
        raise ValueError(f"name must be a non-empty str; got {job_type!r}")
    if not isinstance(idempotent, bool):
        raise TypeError(f"idempotent must be True or False; got {idempotent!r}")
    task = Task(
        jobs,
        func,
        queue=queue,
        name=job_type,
        retry=retry,
        idempotent=idempotent,
        max_runtime_seconds=max_runtime_seconds,
    )
    jobs.handler(
        job_type,
        max_runtime_seconds=max_runtime_seconds,
        retry=retry,
        idempotent=idempotent,
        limits=limits,
    )(task._handler_func())
    return task


def _keyword_signature(
    func: cabc.Callable[..., object], name: str
) -> inspect.Signature:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"task {name!r}: cannot read the signature: {exc}") from None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.VAR_POSITIONAL):
            raise TypeError(
                f"task {name!r}: parameter {parameter.name!r} cannot be passed by"
                " keyword, and a task's arguments arrive as the payload's keys"
            )
    return signature


def _named(handler: HandlerFunc, func: cabc.Callable[..., object]) -> HandlerFunc:
    """Give ``handler`` ``func``'s names, for errors that name the handler."""
    handler.__module__ = func.__module__
    handler.__qualname__ = getattr(func, "__qualname__", handler.__qualname__)
    handler.__name__ = getattr(func, "__name__", handler.__name__)
    return handler
