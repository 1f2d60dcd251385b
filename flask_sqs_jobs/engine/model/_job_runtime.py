"""What one running job reaches through its :class:`Job`: its runtime.

The worker's :class:`~flask_sqs_jobs.engine.worker.JobRunner` creates a
:class:`JobRuntime` for each job whose handler it is about to call and
declares it on the job (``Job._runtime``, the job's only link to the worker).
Through it ``current_job.session`` opens the job's session and
``current_job.set_progress`` reaches whoever records jobs; the heartbeat
calls :meth:`JobRuntime.renew` after each visibility extension, so that an
idempotent job's key is renewed with its message.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from ._job_session import JobSession
from ._progress import progress_not_recorded
from ._progress import ProgressSink

#: Renews what the job holds beside its message (its idempotency key) for
#: the seconds the message's visibility was just extended by.
Renewal: t.TypeAlias = cabc.Callable[[int], None]


class JobRuntime:
    """The session, the progress sink and the lease renewal of one running job.

    Owned by the job runner, which creates it before the handler is called
    and closes it with the job's scope. The renewal is set and cleared by the
    runner's idempotency guard (the job's thread) and read by the heartbeat's
    renewal pool: a single attribute, read once per call, so no lock is needed
    (a renewal cleared while one is on its way is refused by the store).

    :param session: the job's session (opened on first use).
    :param progress: where ``set_progress`` reports go; None when nothing
        records jobs.
    """

    __slots__ = (
        "_permits",
        "_progress",
        "_release",
        "_renewal",
        "batch",
        "key_completed",
        "key_holder",
        "result",
        "session",
    )

    def __init__(self, session: JobSession, progress: ProgressSink | None) -> None:
        self.session = session
        self._progress = progress
        self._renewal: Renewal | None = None
        self._permits: Renewal | None = None
        self._release: cabc.Callable[[], None] | None = None
        #: The job id that held or completed this job's idempotency key when
        #: the guard found it taken (a duplicate, in progress, a conflict).
        self.key_holder: str | None = None
        #: Whether this delivery completed the job's idempotency key: its work
        #: is done, whatever becomes of the message's delete.
        self.key_completed = False
        #: The handler's return value once it returned, for the ``consume``
        #: middleware that records it before the message is settled.
        self.result: object = None
        #: The batch a running child reaches as ``current_job.batch`` (set by
        #: the workflows' middleware), or None.
        self.batch: t.Any = None

    def report_progress(self, fraction: float, message: str | None) -> None:
        """Hand a checked progress report to the sink (from the handler's thread)."""
        if self._progress is None:
            progress_not_recorded(fraction)
            return
        self._progress(fraction, message)

    @property
    def renews(self) -> bool:
        """Whether something must be renewed with the message's visibility."""
        return self._renewal is not None or self._permits is not None

    def renew_with(self, renewal: Renewal | None) -> None:
        """Renew ``renewal`` with each extension from now on (None: stop)."""
        self._renewal = renewal

    def hold_permits(self, renewal: Renewal, release: cabc.Callable[[], None]) -> None:
        """The job holds limit permits: renew them with each extension until
        :meth:`release_permits` (its handler is done) or the scope closes."""
        self._permits, self._release = renewal, release

    def release_permits(self) -> None:
        """Return the job's limit permits, if it holds any (once, from its thread)."""
        self._permits = None
        release, self._release = self._release, None
        if release is not None:
            release()

    def renew(self, seconds: int) -> None:
        """The message's visibility was extended by ``seconds``: renew with it.

        Called by the heartbeat on a pool of its own, never with its lock held.
        """
        for renewal in (self._renewal, self._permits):
            if renewal is not None:
                renewal(seconds)

    def close(self) -> None:
        """The job's scope ends: close its session (rolling back what is left)."""
        self._renewal = None
        try:
            self.session.close()
        finally:
            self.release_permits()
