"""The enqueue side of a task: its methods, bound options and what they return."""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import dataclasses
import datetime
import functools
import typing as t

from .engine.model import JSONObject
from .engine.model import new_job_id
from .engine.unique import HolderJobId
from .workflows import make_signature
from .workflows import Signature
from .workflows import TaskOfSignature

if t.TYPE_CHECKING:
    from ._jobs_facade import JobsFacade

P = t.ParamSpec("P")
R = t.TypeVar("R")
R_co = t.TypeVar("R_co", covariant=True)


class TaskLike(TaskOfSignature, t.Protocol[P, R_co]):
    """What the enqueue methods need of a :class:`~flask_sqs_jobs.Task`."""

    jobs: JobsFacade

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


@dataclasses.dataclass(frozen=True)
class EnqueuedJob:
    """A job a :class:`Task` enqueued.

    ``message_id`` is the SQS MessageId, or None when the job went into the
    outbox (``session=``) and is not sent yet; a buffered send's is filled
    in once the send buffer sent it. A unique job whose key
    another job held comes back as that job (``duplicate`` True,
    ``message_id`` None): nothing was sent.
    """

    job_id: str
    message_id: str | None
    _jobs: JobsFacade = dataclasses.field(repr=False, compare=False)
    #: True when nothing was sent: ``job_id`` is the job holding the unique key.
    duplicate: bool = False

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
class EnqueueOptions:
    """The enqueue options a task sends with; None means the default."""

    queue: str
    delay_seconds: int | None = None
    run_at: datetime.datetime | None = None
    job_id: str | None = None
    message_group_id: str | None = None
    message_deduplication_id: str | None = None
    correlation_fields: JSONObject | None = None
    max_runtime_seconds: float | None = None
    expires_in: float | None = None
    expires_at: datetime.datetime | None = None
    priority: int | None = None
    session: t.Any = None
    unique: bool | None = None
    unique_key: str | None = None
    unique_for: float | None = None
    unique_until: str | None = None
    on_duplicate: str | None = None
    debounce: float | None = None
    tenant: str | None = None
    tags: tuple[str, ...] | None = None
    buffered: bool | None = None
    send_after_commit: bool | None = None

    def sent(self) -> dict[str, t.Any]:
        """The options for ``jobs.enqueue``, the queue and the session aside."""
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del given["queue"], given["session"]
        return {name: value for name, value in given.items() if value is not None}


class Sender(t.Generic[P, R]):
    """What a task and its bound options share: the enqueue methods."""

    _task: TaskLike[P, R]
    _options: EnqueueOptions

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueuedJob:
        """Send the job with these keyword arguments as its payload.

        Works wherever the app is current. Everything is checked before
        anything is sent.

        :raises TypeError: a positional, missing or unknown argument, or one
            that is not JSON.
        """
        task, options = self._task, self._options
        payload = task.build_payload(args, kwargs)
        job_id = options.job_id or new_job_id()
        sent = {**options.sent(), "job_id": job_id}
        if options.session is not None or options.debounce is not None:
            # The outbox's enqueue takes session= and returns the job id.
            outbox_enqueue: t.Any = task.jobs.enqueue
            returned = outbox_enqueue(
                options.queue, task.name, payload, session=options.session, **sent
            )
            return _enqueued(task.jobs, str(returned or job_id), None, returned)
        message_id = task.jobs.enqueue(options.queue, task.name, payload, **sent)
        buffered = task.jobs.config().buffers(options.buffered)
        if isinstance(message_id, HolderJobId) or not buffered:
            return _enqueued(task.jobs, job_id, message_id, message_id)
        enqueued = EnqueuedJob(job_id, None, task.jobs)
        buffer = task.jobs.queue_group().send_buffer
        if buffer is not None:  # None in eager mode: the job ran already
            buffer.when_sent(job_id, functools.partial(_fill, enqueued))
        return enqueued

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
                payload = task.build_payload((), dict(call))
            except TypeError as exc:
                raise TypeError(f"calls[{index}]: {exc}") from None
            specs.append(
                {
                    "job_type": task.name,
                    "payload": payload,
                    "job_id": new_job_id(),
                    **_batch_options(options),
                }
            )
        ids = [spec["job_id"] for spec in specs]
        if options.session is not None:
            outbox_enqueue_many: t.Any = task.jobs.enqueue_many
            returned = outbox_enqueue_many(
                options.queue,
                specs,
                session=options.session,
                send_after_commit=options.send_after_commit,
            )
            return [
                _enqueued(task.jobs, job_id, None, value)
                for job_id, value in zip(ids, returned, strict=True)
            ]
        message_ids = task.jobs.enqueue_many(
            options.queue, specs, send_after_commit=options.send_after_commit
        )  # without a session, send_after_commit is refused, as for enqueue
        return [
            _enqueued(task.jobs, job_id, message_id, message_id)
            for job_id, message_id in zip(ids, message_ids, strict=True)
        ]

    def s(self, **kwargs: t.Any) -> Signature:
        """This call as a :class:`Signature`, to send later or in a workflow.

        Checked like :meth:`enqueue` (unknown and non-JSON arguments raise
        ``TypeError``); arguments a workflow passes may be left out.
        """
        options = self._options
        return make_signature(
            self._task, options.queue, kwargs, immutable=False, options=options.sent()
        )

    def si(self, **kwargs: t.Any) -> Signature:
        """Like :meth:`s`, immutable: a chain never passes it a previous result."""
        options = self._options
        return make_signature(
            self._task, options.queue, kwargs, immutable=True, options=options.sent()
        )

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueuedJob:
        """:meth:`enqueue` from a coroutine, in a thread; the app context goes along."""
        # to_thread runs the call in a copy of this context, Flask's included.
        return await asyncio.to_thread(self.enqueue, *args, **kwargs)

    async def aenqueue_many(
        self, calls: cabc.Iterable[cabc.Mapping[str, t.Any]]
    ) -> list[EnqueuedJob]:
        """:meth:`enqueue_many` from a coroutine, in a thread (app context kept)."""
        return await asyncio.to_thread(self.enqueue_many, list(calls))

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
        max_runtime_seconds: float | None = None,
        expires_in: float | None = None,
        expires_at: datetime.datetime | None = None,
        priority: int | None = None,
        session: t.Any = None,
        unique: bool | None = None,
        unique_key: str | None = None,
        unique_for: float | None = None,
        unique_until: str | None = None,
        on_duplicate: str | None = None,
        debounce: float | None = None,
        tenant: str | None = None,
        tags: cabc.Sequence[str] | None = None,
        buffered: bool | None = None,
        send_after_commit: bool | None = None,
    ) -> TaskOptions[P, R]:
        """Return the task with these enqueue options, for ``.enqueue(...)``.

        The options are those of ``jobs.enqueue``; ``queue`` overrides the
        task's queue and ``session`` writes the job into the outbox in that
        session's transaction. ``unique``, ``unique_key``, ``unique_for``,
        ``unique_until``, ``on_duplicate`` and ``debounce`` are those of unique
        jobs (``docs/flow-control.md``). Options left None keep their value.
        """
        given = {
            "queue": queue,
            "delay_seconds": delay_seconds,
            "run_at": run_at,
            "job_id": job_id,
            "message_group_id": message_group_id,
            "message_deduplication_id": message_deduplication_id,
            "correlation_fields": correlation_fields,
            "max_runtime_seconds": max_runtime_seconds,
            "expires_in": expires_in,
            "expires_at": expires_at,
            "priority": priority,
            "session": session,
            "unique": unique,
            "unique_key": unique_key,
            "unique_for": unique_for,
            "unique_until": unique_until,
            "on_duplicate": on_duplicate,
            "debounce": debounce,
            "tenant": tenant,
            "tags": None if tags is None else tuple(tags),
            "buffered": buffered,
            "send_after_commit": send_after_commit,
        }
        changes = {name: value for name, value in given.items() if value is not None}
        return TaskOptions(self._task, dataclasses.replace(self._options, **changes))


def _batch_options(options: EnqueueOptions) -> dict[str, t.Any]:
    """The options of each job of a batch: a batch is one request already."""
    sent = options.sent()
    sent.pop("buffered", None)
    return sent


def _fill(enqueued: EnqueuedJob, message_id: str) -> None:
    object.__setattr__(enqueued, "message_id", message_id)


def _enqueued(
    jobs: JobsFacade, job_id: str, message_id: str | None, returned: object
) -> EnqueuedJob:
    """The job an enqueue made; the holder when ``returned`` is a holder's id."""
    if isinstance(returned, HolderJobId):
        return EnqueuedJob(str(returned), None, jobs, duplicate=True)
    return EnqueuedJob(job_id, message_id, jobs)


class TaskOptions(Sender[P, R]):
    """A :class:`Task` with enqueue options bound, from :meth:`Task.options`."""

    def __init__(self, task: TaskLike[P, R], options: EnqueueOptions) -> None:
        self._task = task
        self._options = options

    def __repr__(self) -> str:
        return f"<TaskOptions {self._task.name!r} {self._options!r}>"
