"""Releasing a unique job's key in the worker: when it starts, or when it is done.

:class:`UniqueRelease` is a :class:`Hooks` subclass, so every way a job
runs (a worker, eager mode) releases its key in the one place hooks are
called, with the outcome the settler decided: ``unique_until="started"``
frees the key as the handler starts, ``"finished"`` once the job's message
is settled for good (succeeded, deleted, dead-lettered, a duplicate; not
while it will be retried). A job settled for good without having started
(dead-lettered unread, say) frees its key either way. The store calls are
made off the job's path, by :class:`~._releaser.Releaser`.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from ..model import Hooks
from ..model import Job
from ..model import Outcome
from ._options import FINISHED
from ._options import STARTED
from ._releaser import Releaser

if t.TYPE_CHECKING:
    from ._keys import UniqueKeys

#: Outcomes after which a job has run its handler.
_RAN = frozenset({Outcome.SUCCESS, Outcome.RETRY})


class UniqueRelease(Hooks):
    """Free a unique job's key when its ``unique_until`` moment comes.

    Called on a job's thread by the worker's hooks; it only hands the key to
    its :class:`Releaser`. A job without a key (``job.unique_key`` None)
    costs one attribute read per hook. A failing release is handed to
    ``on_error`` (the app's ``worker_error``, kind ``"store"``) and never
    changes a job's outcome: the key then expires with its ``unique_for``.
    """

    def __init__(
        self,
        keys: cabc.Callable[[], UniqueKeys],
        on_error: cabc.Callable[[str | None, BaseException], None],
        *,
        synchronous: bool = False,
    ) -> None:
        self.releaser = Releaser(
            keys, lambda error: on_error(None, error), synchronous=synchronous
        )

    def job_started(self, job: Job) -> None:
        if job.unique_key is not None and job.unique_until == STARTED:
            self.releaser.submit(job.unique_key, t.cast(str, job.job_id))

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
        if job.unique_key is None or will_retry:
            return
        if job.unique_until == FINISHED or outcome not in _RAN:
            self.releaser.submit(job.unique_key, t.cast(str, job.job_id))

    def worker_stopped(self, reason: str) -> None:
        """The worker's last jobs are done: free their keys before it returns."""
        self.releaser.flush()
