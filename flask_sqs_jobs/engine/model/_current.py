"""``current_job``: the job running in this thread, for handlers and their helpers."""

from __future__ import annotations

import contextvars
import typing as t

from ._job import Job

_current: contextvars.ContextVar[Job] = contextvars.ContextVar(
    "flask_sqs_jobs.current_job"
)


class _CurrentJob:
    """A proxy to the running :class:`Job`; raises ``RuntimeError`` outside a job."""

    __slots__ = ()

    def _get(self) -> Job:
        try:
            return _current.get()
        except LookupError:
            raise RuntimeError(
                "Working outside of a job: current_job is only available while a"
                " handler runs in a worker (or in eager mode)."
            ) from None

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self._get(), name)

    def __bool__(self) -> bool:
        return _current.get(None) is not None

    def __repr__(self) -> str:
        job = _current.get(None)
        return (
            f"<current_job {job!r}>" if job is not None else "<current_job (unbound)>"
        )


#: The running job: ``job_type``, ``queue``, ``job_id``, ``message_id``,
#: ``receive_count``, ``correlation_fields``, ``payload``, ``scheduled_for`` (a
#: periodic job's tick), ``abort_requested`` and ``cancel_requested`` (each a
#: ``threading.Event``). Raises
#: ``RuntimeError`` outside a job.
current_job: Job = t.cast(Job, _CurrentJob())


def set_current_job(job: Job) -> contextvars.Token[Job]:
    return _current.set(job)


def reset_current_job(token: contextvars.Token[Job]) -> None:
    _current.reset(token)
