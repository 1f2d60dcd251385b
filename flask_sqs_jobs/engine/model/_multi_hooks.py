"""Several :class:`Hooks` as one, each isolated from the others."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import typing as t

from ._hooks import ErrorKind
from ._hooks import Hooks
from ._isolation import call_hook

if t.TYPE_CHECKING:
    from ._job import Job
    from ._outcome import Outcome


class MultiHooks(Hooks):
    """Several :class:`Hooks` called in turn (contexts entered in order).

    A hook that raises is logged (``hook_failed``), reported to every one's
    ``worker_error`` with kind ``"hook"`` (a ``worker_error`` that raises is
    only logged), and the others still run: its methods never raise. Nested
    groups are flattened, so a failure reaches every hook of the worker.
    Which hooks implement each moment is looked up once, here, so a moment
    nobody implements costs nothing per job. Called from any of the worker's
    threads, never with a lock of the worker held.
    """

    _fans_out: t.ClassVar[bool] = True

    def __init__(self, hooks: cabc.Iterable[Hooks]) -> None:
        flat: list[Hooks] = []
        for each in hooks:
            if type(each) is MultiHooks:
                flat.extend(each.hooks)
            else:
                flat.append(each)
        self.hooks: tuple[Hooks, ...] = tuple(flat)
        self._implementing = {
            name: tuple(h for h in self.hooks if _implements(h, name))
            for name in _MOMENTS
        }

    def implementing(self, name: str) -> tuple[Hooks, ...]:
        """The hooks that implement the moment ``name`` (others do nothing there)."""
        return self._implementing[name]

    def job_context(self, job: Job) -> t.ContextManager[object]:
        contexts = self._implementing["job_context"]
        if not contexts:
            return contextlib.nullcontext()
        if len(contexts) == 1:
            return contexts[0].job_context(job)
        stack = contextlib.ExitStack()
        with stack:
            for hooks in contexts:
                stack.enter_context(hooks.job_context(job))
            return stack.pop_all()

    def job_enqueued(self, job: Job, message_id: str) -> None:
        self._each("job_enqueued", job.queue, job, message_id)

    def job_received(self, job: Job) -> None:
        self._each("job_received", job.queue, job)

    def job_started(self, job: Job) -> None:
        self._each("job_started", job.queue, job)

    def job_progress(self, job: Job, fraction: float, message: str | None) -> None:
        self._each("job_progress", job.queue, job, fraction, message)

    def job_succeeded(self, job: Job, result: object) -> None:
        self._each("job_succeeded", job.queue, job, result)

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
        *,
        result: object = None,
        will_retry: bool = False,
    ) -> None:
        self._each(
            "job_finished",
            job.queue,
            job,
            outcome,
            duration_ms,
            exception,
            result=result,
            will_retry=will_retry,
        )

    def worker_started(self, queues: list[str]) -> None:
        self._each("worker_started", None, queues)

    def worker_stopped(self, reason: str) -> None:
        self._each("worker_stopped", None, reason)

    def receive_failed(self, queue: str, error: BaseException) -> None:
        self._each("receive_failed", queue, queue, error)

    def worker_error(
        self, queue: str | None, exception: BaseException, kind: ErrorKind
    ) -> None:
        for hooks in self._implementing["worker_error"]:
            call_hook("worker_error", hooks.worker_error, queue, exception, kind)

    def schedule_fired(self, schedule: str) -> None:
        self._each("schedule_fired", None, schedule)

    def _each(
        self, name: str, queue: str | None, *args: t.Any, **kwargs: t.Any
    ) -> None:
        """Call hook ``name`` on each; one that raises does not stop the others."""
        for hooks in self._implementing[name]:
            failure = call_hook(name, getattr(hooks, name), *args, **kwargs)
            if failure is not None:
                self.worker_error(queue, failure, "hook")


def as_multi(hooks: Hooks) -> MultiHooks:
    """``hooks`` as a :class:`MultiHooks`, so that its failures are reported."""
    return hooks if type(hooks) is MultiHooks else MultiHooks([hooks])


def overrides(hooks: Hooks, name: str) -> bool:
    """Whether ``hooks`` (or, for :class:`MultiHooks`, any of them) implements ``name``.

    Lets the engine skip work for a hook nobody implements.
    """
    if type(hooks) is MultiHooks:
        return bool(hooks.implementing(name))
    return _implements(hooks, name)


#: The moments a hook may implement.
_MOMENTS = tuple(
    name
    for name, value in vars(Hooks).items()
    if not name.startswith("_") and callable(value)
)


def _implements(hooks: Hooks, name: str) -> bool:
    """Whether ``hooks`` does something at ``name``: its class (or the
    instance itself) replaces :class:`Hooks`' method that does nothing."""
    if name in getattr(hooks, "__dict__", ()):
        return True
    if type(hooks) is MultiHooks:
        return bool(hooks.implementing(name))
    return getattr(type(hooks), name) is not getattr(Hooks, name)


def report_error(
    hooks: Hooks, queue: str | None, exception: BaseException, kind: ErrorKind
) -> None:
    """Tell ``hooks`` of a failure outside a handler; never raises."""
    call_hook("worker_error", hooks.worker_error, queue, exception, kind)
