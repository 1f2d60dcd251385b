"""Hooks through which a framework layer watches and wraps the engine."""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing as t
import warnings

if t.TYPE_CHECKING:
    from ._job import Job
    from ._outcome import Outcome

#: What failed outside a handler, as ``worker_error`` says: a receive, a call
#: settling a message, a hook or signal receiver, a job-store write.
ErrorKind: t.TypeAlias = t.Literal["receive", "settle", "hook", "store"]

#: The arguments ``job_finished`` gained after its first release.
_NEW_FINISHED_ARGUMENTS = ("result", "will_retry")


class Hooks:
    """Callbacks the engine makes at each moment of a job's and worker's life.

    The defaults do nothing. The Flask layer overrides them to push an app
    context around each job and send its blinker signals; the engine itself
    never imports Flask. A hook that raises is logged by the caller, reported
    to ``worker_error`` (kind ``"hook"``) and never changes a job's outcome.

    A job's hooks run in this order: ``job_context`` is entered,
    ``job_received``, ``job_started`` (right before the handler; not for a
    deferred job or a duplicate), ``job_progress`` while the handler runs,
    ``job_finished`` once its message is settled; then the context is exited.
    Every job that gets ``job_received`` gets ``job_finished``.

    A subclass written for an earlier release keeps working: a
    ``job_finished`` without the ``result`` and ``will_retry`` arguments is
    called without them, and ``job_succeeded`` is still called (with a
    :class:`DeprecationWarning` when the subclass is defined).
    """

    def __init_subclass__(cls, **kwargs: t.Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "job_finished" in own:
            cls.job_finished = _taking_new_arguments(own["job_finished"])  # type: ignore[method-assign]
        if "job_succeeded" in own and not own.get("_fans_out", False):
            warnings.warn(
                f"{cls.__qualname__} overrides Hooks.job_succeeded, which is"
                " deprecated and will be removed in the next release: override"
                " job_finished and read its result argument instead",
                DeprecationWarning,
                stacklevel=2,
            )

    def job_context(self, job: Job) -> t.ContextManager[object]:
        """Return a context manager entered around one job's processing.

        It is exited with the handler's exception, if any, the way Flask's
        app context is popped with a request's exception.
        """
        return contextlib.nullcontext()

    def job_enqueued(self, job: Job, message_id: str) -> None:
        """Called after a job was sent."""

    def job_received(self, job: Job) -> None:
        """Called when a received message turned out to be a job this worker
        runs (or defers), inside its context, before its handler runs.

        ``job.message_id`` and ``job.receive_count`` are set; the message is
        leased (the heartbeat keeps it invisible) until ``job_finished``.
        """

    def job_started(self, job: Job) -> None:
        """Called right before the handler runs."""

    def job_progress(self, job: Job, fraction: float, message: str | None) -> None:
        """Called when the running handler reports progress (``set_progress``).

        ``fraction`` is checked (0 to 1) and ``message`` escaped and cut.
        """

    def job_succeeded(self, job: Job, result: object) -> None:
        """Called with the handler's return value, before ``job_finished``.

        .. deprecated:: 0.1.0
           ``job_finished`` receives the handler's result; this hook goes in
           the next release.
        """

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
        """Called once the job's message was deleted or left for redelivery.

        :param result: the handler's return value (a duplicate's: the one kept
            with its idempotency key); None when it raised or did not run.
        :param will_retry: whether the message will come back to the queue
            (``retry``, ``heartbeat_failed``, ``delete_failed``, unless SQS
            moves it to the dead-letter queue on its next receive).
        """

    def worker_started(self, queues: list[str]) -> None:
        """Called when a worker starts polling ``queues`` (logical names)."""

    def worker_stopped(self, reason: str) -> None:
        """Called when a worker stopped, with why (``"stop_requested"``, ...)."""

    def receive_failed(self, queue: str, error: BaseException) -> None:
        """Called when receiving from the logical ``queue`` failed."""

    def worker_error(
        self, queue: str | None, exception: BaseException, kind: ErrorKind
    ) -> None:
        """Called for a failure outside a handler.

        :param queue: the logical queue it concerns; None when it concerns no
            single queue (the worker's row in the store, say).
        :param kind: ``"receive"`` (a ReceiveMessage call), ``"settle"`` (a
            call settling a message: delete, visibility, dead letter, deferral),
            ``"hook"`` (a hook or signal receiver raised) or ``"store"`` (a
            job-store read or write: idempotency keys, job records, the
            worker's row).
        """

    def schedule_fired(self, schedule: str) -> None:
        """Called when this process enqueued a tick of the periodic job ``schedule``."""


def _taking_new_arguments(func: t.Any) -> t.Any:
    """``func`` (a ``job_finished``), made to take the arguments added since.

    One written for an earlier release gets only the new arguments it names.
    """
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return func
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return func
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    taken = {
        name
        for name in _NEW_FINISHED_ARGUMENTS
        if name in parameters and parameters[name].kind in named
    }
    if len(taken) == len(_NEW_FINISHED_ARGUMENTS):
        return func

    @functools.wraps(func)
    def job_finished(self: Hooks, *args: t.Any, **kwargs: t.Any) -> object:
        return func(self, *args, **{k: v for k, v in kwargs.items() if k in taken})

    return job_finished
