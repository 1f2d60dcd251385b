"""``current_job.session``: a database session per job, opened on first use.

The engine never imports SQLAlchemy: a store gives the worker a factory of
sessions, and the worker commits the job's session when its handler succeeds
(with the idempotency key's completion in the same transaction).
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t


class Session(t.Protocol):
    """What the worker does with a job's session."""

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...


#: Opens a session on the store's database (``SQLAlchemyStore.session``).
SessionFactory: t.TypeAlias = cabc.Callable[[], t.Any]

NO_SESSIONS = (
    "current_job.session needs a SQL job store: set SQS_JOBS_STORE_URL (or pass"
    " SQSJobs(store=SQLAlchemyStore(...)); with the engine alone, pass"
    " JobWorker(session_factory=...))"
)


class JobSession:
    """The session of one job: opened by the first access, closed after the job."""

    __slots__ = ("_factory", "opened")

    def __init__(self, factory: SessionFactory | None) -> None:
        self._factory = factory
        #: The session, once the handler asked for it.
        self.opened: Session | None = None

    def get(self) -> t.Any:
        if self.opened is None:
            if self._factory is None:
                raise RuntimeError(NO_SESSIONS)
            self.opened = self._factory()
        return self.opened

    def close(self) -> None:
        """Close the session (rolling back whatever was not committed)."""
        session, self.opened = self.opened, None
        if session is not None:
            session.close()
