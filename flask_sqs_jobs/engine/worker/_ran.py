"""What phase one hands to phase two: a message after its handler ran.

Built once by the :class:`~._running.JobRunner` and never changed after: the
settler reads it and produces a value of its own, and the slot thread closes
its scope with :meth:`Ran.close`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum

from ..model import Job
from ..model import Outcome
from ..model import Retry
from ..sqs import Pointer
from ._delivery import Delivery

#: The results whose message is deleted (or dead-lettered).
DELETED_OUTCOMES = (
    Outcome.SUCCESS,
    Outcome.DELETE,
    Outcome.DUPLICATE,
    Outcome.EXPIRED,
    Outcome.CANCELLED,
)


class Kind(enum.Enum):
    """What a received message turned out to be."""

    #: A job whose handler ran (or could not start).
    JOB = "job"
    #: A job that is not due yet (``run_at`` more than a second ahead).
    DEFERRED = "deferred"
    #: A job received after its ``expires_at``: deleted unrun.
    EXPIRED = "expired"
    #: A job cancelled before it started: deleted unrun.
    CANCELLED = "cancelled"
    #: Not a job at all (not JSON, no job_type, ...).
    MALFORMED = "malformed"
    #: A job of a type this worker has no handler for.
    UNKNOWN = "unknown"
    #: A large-payload pointer whose S3 object could not (or may not) be read.
    UNFETCHED = "unfetched"


@dataclasses.dataclass(frozen=True, slots=True)
class HandlerResult:
    """What came of calling a job's handler, before its message is settled.

    ``outcome`` is one of ``success``, ``retry``, ``delete`` or ``duplicate``:
    what the handler (or its idempotency key) asks for. The settler turns it
    into the job's final outcome.
    """

    outcome: Outcome
    #: What the handler raised (or what stopped it from running).
    exception: BaseException | None = None
    #: What the handler returned (a duplicate's: the result kept with its key).
    value: object = None
    #: The idempotency claim's state (``claimed``, ``completed``, ...), for
    #: the ``job_finished`` line; None for a handler that is not idempotent.
    idempotency: str | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the handler returned (and its session committed)."""
        return self.outcome is Outcome.SUCCESS


#: The result of a message whose handler did not fail (or never ran).
RETURNED = HandlerResult(Outcome.SUCCESS)


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class Ran:
    """A message after phase one, its scope still open.

    Owned by the slot thread that ran phase one; read by the settler (the
    same thread); closed by that thread after the settle phase.
    """

    delivery: Delivery
    kind: Kind
    #: The job's scope: its log context, its framework context (Flask's app
    #: context), its runtime. Left open until :meth:`close`.
    scope: contextlib.ExitStack
    #: When phase one began (monotonic), for ``duration_ms``.
    started: float
    job: Job | None = None
    handled: HandlerResult = RETURNED
    #: Why a malformed message is not a job.
    reason: str = ""
    #: When a deferred job is due (an expired job's: when it expired).
    run_at: dt.datetime | None = None
    #: Where the body was read from, for a large payload sent through S3.
    pointer: Pointer | None = None
    #: The handler's retry policy, once the handler was called.
    retry: Retry | None = None

    @property
    def exception(self) -> BaseException | None:
        """What the handler raised (or what kept it from running)."""
        return self.handled.exception

    def close(self) -> None:
        """Leave the job's scope, handing it the handler's exception if any.

        The scope sees what the handler raised (as Flask's app context sees a
        request's exception), whatever became of the message afterwards.
        """
        handled = self.handled
        exc = None if handled.succeeded else handled.exception
        if exc is None:
            self.scope.__exit__(None, None, None)
        else:
            self.scope.__exit__(type(exc), exc, exc.__traceback__)
