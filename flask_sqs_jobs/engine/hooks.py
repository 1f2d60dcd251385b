"""Hooks through which a framework layer watches and wraps the engine."""

from __future__ import annotations

import contextlib
import typing as t

if t.TYPE_CHECKING:
    from .job import Job
    from .outcome import Outcome


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
