"""Hooks through which a framework layer watches and wraps the engine."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import typing as t

from ._isolation import call_hook

if t.TYPE_CHECKING:
    from ._job import Job
    from ._outcome import Outcome


class Hooks:
    """Callbacks the engine makes at each moment of a job's and worker's life.

    The defaults do nothing. The Flask layer overrides them to push an app
    context around each job and send its blinker signals; the engine itself
    never imports Flask. A hook that raises is logged by the caller and never
    changes a job's outcome.
    """

    def job_context(self, job: Job) -> t.ContextManager[object]:
        """Return a context manager entered around one job's processing.

        It is exited with the handler's exception, if any, the way Flask's
        app context is popped with a request's exception.
        """
        return contextlib.nullcontext()

    def job_enqueued(self, job: Job, message_id: str) -> None:
        """Called after a job was sent."""

    def job_started(self, job: Job) -> None:
        """Called right before the handler runs."""

    def job_succeeded(self, job: Job, result: object) -> None:
        """Called with the handler's return value, before ``job_finished``."""

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
    ) -> None:
        """Called once the job's message was deleted or left for redelivery."""

    def worker_started(self, queues: list[str]) -> None:
        """Called when a worker starts polling ``queues`` (logical names)."""

    def worker_stopped(self, reason: str) -> None:
        """Called when a worker stopped, with why (``"stop_requested"``, ...)."""

    def receive_failed(self, queue: str, error: BaseException) -> None:
        """Called when receiving from the logical ``queue`` failed."""

    def schedule_fired(self, schedule: str) -> None:
        """Called when this process enqueued a tick of the periodic job ``schedule``."""


class MultiHooks(Hooks):
    """Several :class:`Hooks` called in turn (contexts entered in order)."""

    def __init__(self, hooks: cabc.Sequence[Hooks]) -> None:
        self.hooks = tuple(hooks)

    def job_context(self, job: Job) -> t.ContextManager[object]:
        stack = contextlib.ExitStack()
        with stack:
            for hooks in self.hooks:
                stack.enter_context(hooks.job_context(job))
            return stack.pop_all()

    def job_enqueued(self, job: Job, message_id: str) -> None:
        self._each("job_enqueued", job, message_id)

    def job_started(self, job: Job) -> None:
        self._each("job_started", job)

    def job_succeeded(self, job: Job, result: object) -> None:
        self._each("job_succeeded", job, result)

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
    ) -> None:
        self._each("job_finished", job, outcome, duration_ms, exception)

    def worker_started(self, queues: list[str]) -> None:
        self._each("worker_started", queues)

    def worker_stopped(self, reason: str) -> None:
        self._each("worker_stopped", reason)

    def receive_failed(self, queue: str, error: BaseException) -> None:
        self._each("receive_failed", queue, error)

    def schedule_fired(self, schedule: str) -> None:
        self._each("schedule_fired", schedule)

    def _each(self, name: str, *args: t.Any) -> None:
        """Call hook ``name`` on each; one that raises does not stop the others."""
        for hooks in self.hooks:
            call_hook(name, getattr(hooks, name), *args)
