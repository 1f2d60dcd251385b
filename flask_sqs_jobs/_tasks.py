"""Tasks: a handler whose function takes the payload's keys as keyword arguments.

``@jobs.task`` registers the handler and returns a :class:`Task`, which calls
the function as before and adds typed ``enqueue`` methods: a type checker sees
the function's parameters on them (PEP 612).
"""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import dataclasses
import datetime
import functools
import inspect
import typing as t

from .engine._exceptions import NonRetryableError
from .engine._handlers import HandlerFunc
from .engine._job import JSONObject
from .engine._job_ids import new_job_id
from .engine._producer import check_json
from .engine._retry import Retry

if t.TYPE_CHECKING:
    from ._extension import SQSJobs

P = t.ParamSpec("P")
R = t.TypeVar("R")


@dataclasses.dataclass(frozen=True)
class EnqueuedJob:
    """A job a :class:`Task` enqueued.

    ``message_id`` is the SQS MessageId, or None when the job went into the
    outbox (``session=``) and is not sent yet.
    """

    job_id: str
    message_id: str | None
    _jobs: SQSJobs = dataclasses.field(repr=False, compare=False)

    def record(self) -> t.Any:
        """The job's record (``jobs.get_job(job_id)``), or None if it has none.

        Call it where the app is current.

        :raises RuntimeError: no job store is configured (set
            ``SQS_JOBS_STORE_URL``).
        """
        self._jobs.store()  # Raises the RuntimeError that names the setting.
        get_job = getattr(self._jobs, "get_job", None)
        if get_job is None:
            raise RuntimeError(
                "job records are not available: this SQSJobs has no get_job()"
            )
        return get_job(self.job_id)


@dataclasses.dataclass(frozen=True)
class _Options:
    """The enqueue options a task sends with; None means the default."""

    queue: str
    delay_seconds: int | None = None
    run_at: datetime.datetime | None = None
    job_id: str | None = None
    message_group_id: str | None = None
    message_deduplication_id: str | None = None
    correlation_fields: JSONObject | None = None
    session: t.Any = None

    def sent(self) -> dict[str, t.Any]:
        """The options for ``jobs.enqueue``, the queue and the session aside."""
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del given["queue"], given["session"]
        return {name: value for name, value in given.items() if value is not None}


class _Sender(t.Generic[P, R]):
    """What a task and its bound options share: the enqueue methods."""

    _task: Task[P, R]
    _options: _Options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueuedJob:
        """Send the job with these keyword arguments as its payload.

        Works wherever the app is current. Everything is checked before
        anything is sent.

        :raises TypeError: a positional, missing or unknown argument, or one
            that is not JSON.
        """
        task, options = self._task, self._options
        payload = task._payload(args, kwargs)
        job_id = options.job_id or new_job_id()
        sent = {**options.sent(), "job_id": job_id}
        if options.session is not None:
            # The outbox's enqueue takes session= and returns the job id.
            outbox_enqueue: t.Any = task.jobs.enqueue
            returned = outbox_enqueue(
                options.queue, task.name, payload, session=options.session, **sent
            )
            return EnqueuedJob(str(returned or job_id), None, task.jobs)
        message_id = task.jobs.enqueue(options.queue, task.name, payload, **sent)
        return EnqueuedJob(job_id, message_id, task.jobs)

    def enqueue_many(
        self, calls: cabc.Iterable[cabc.Mapping[str, t.Any]]
    ) -> list[EnqueuedJob]:
        """Send one job per mapping of keyword arguments, with SendMessageBatch.

        Every job is checked before any is sent; see ``jobs.enqueue_many``.
        """
        task, options = self._task, self._options
        for shared in ("job_id", "message_deduplication_id"):
            if getattr(options, shared) is not None:
                raise ValueError(
                    f"{shared}= names one job; enqueue_many() cannot share it"
                    " between jobs (each job gets its own job id)"
                )
        specs: list[dict[str, t.Any]] = []
        for index, call in enumerate(calls):
            if not isinstance(call, cabc.Mapping):
                raise TypeError(
                    f"calls[{index}]: each call must be a dict of keyword"
                    f" arguments; got {type(call).__name__}"
                )
            try:
                payload = task._payload((), dict(call))
            except TypeError as exc:
                raise TypeError(f"calls[{index}]: {exc}") from None
            specs.append(
                {
                    "job_type": task.name,
                    "payload": payload,
                    "job_id": new_job_id(),
                    **options.sent(),
                }
            )
        ids = [spec["job_id"] for spec in specs]
        if options.session is not None:
            outbox_enqueue_many: t.Any = task.jobs.enqueue_many
            outbox_enqueue_many(options.queue, specs, session=options.session)
            return [EnqueuedJob(job_id, None, task.jobs) for job_id in ids]
        message_ids = task.jobs.enqueue_many(options.queue, specs)
        return [
            EnqueuedJob(job_id, message_id, task.jobs)
            for job_id, message_id in zip(ids, message_ids, strict=True)
        ]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueuedJob:
        """:meth:`enqueue` from a coroutine, in a thread; the app context goes along."""
        # to_thread runs the call in a copy of this context, Flask's included.
        return await asyncio.to_thread(self.enqueue, *args, **kwargs)

    def options(
        self,
        *,
        queue: str | None = None,
        delay_seconds: int | None = None,
        run_at: datetime.datetime | None = None,
        job_id: str | None = None,
        message_group_id: str | None = None,
        message_deduplication_id: str | None = None,
        correlation_fields: JSONObject | None = None,
        session: t.Any = None,
    ) -> TaskOptions[P, R]:
        """Return the task with these enqueue options, for ``.enqueue(...)``.

        The options are those of ``jobs.enqueue``; ``queue`` overrides the
        task's queue and ``session`` writes the job into the outbox in that
        session's transaction. Options left None keep their value.
        """
        given = {
            "queue": queue,
            "delay_seconds": delay_seconds,
            "run_at": run_at,
            "job_id": job_id,
            "message_group_id": message_group_id,
            "message_deduplication_id": message_deduplication_id,
            "correlation_fields": correlation_fields,
            "session": session,
        }
        changes = {name: value for name, value in given.items() if value is not None}
        return TaskOptions(self._task, dataclasses.replace(self._options, **changes))


class TaskOptions(_Sender[P, R]):
    """A :class:`Task` with enqueue options bound, from :meth:`Task.options`."""

    def __init__(self, task: Task[P, R], options: _Options) -> None:
        self._task = task
        self._options = options

    def __repr__(self) -> str:
        return f"<TaskOptions {self._task.name!r} {self._options!r}>"


class Task(_Sender[P, R]):
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
        jobs: SQSJobs,
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
        self._options = _Options(queue=queue)
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name!r} queue={self.queue!r}>"

    def _payload(
        self, args: tuple[object, ...], kwargs: cabc.Mapping[str, object]
    ) -> JSONObject:
        """Check enqueue arguments against the signature and JSON; the payload."""
        if args:
            raise TypeError(
                f"task {self.name!r} takes keyword arguments only at enqueue (they"
                f" become the payload's keys); got {len(args)} positional. Call"
                f" {self.name}.enqueue(name=value, ...)"
            )
        try:
            self.signature.bind(**kwargs)
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


def make_task(
    jobs: SQSJobs,
    func: cabc.Callable[P, R],
    *,
    queue: str,
    name: str | None,
    retry: Retry | None,
    idempotent: bool,
    max_runtime_seconds: float | None,
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
    options: dict[str, t.Any] = {
        "max_runtime_seconds": max_runtime_seconds,
        "retry": retry,
    }
    # Idempotency is passed on only where this SQSJobs knows it.
    if idempotent and "idempotent" in inspect.signature(jobs.handler).parameters:
        options["idempotent"] = True
    jobs.handler(job_type, **options)(task._handler_func())
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
