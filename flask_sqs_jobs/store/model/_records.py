"""Job records: what the stores keep, and how they are written.

A job's record is written once per transition (queued, running, then how the
attempt ended) by an upsert that never moves the record backwards: writes
from several processes may arrive out of order (the web process's ``queued``
after the worker's ``running``), so each write carries the attempt and the
status, and a store applies it only when it is not older than what it holds.

A record belongs to one job type, fixed by its first write: a write for the
same job id with another type is refused (and reported as a
:class:`RefusedWrite`). A finished record is final: no later write changes it,
except a new delivery of a dead-lettered or failed job (a redrive, a retry),
which starts it again. Both are conditions of the store's write, never read-then-write.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import typing as t

#: Every status a record can have.
QUEUED = "queued"
RUNNING = "running"
SUCCEEDED = "succeeded"
RETRYING = "retrying"
FAILED = "failed"
DEAD_LETTERED = "dead_lettered"
DEFERRED = "deferred"
DUPLICATE = "duplicate"
EXPIRED = "expired"
CANCELLED = "cancelled"
#: A limit refused the job's start; it comes back later (re-sent, like a deferral).
LIMITED = "limited"
STATUSES = (
    QUEUED,
    RUNNING,
    SUCCEEDED,
    RETRYING,
    FAILED,
    DEAD_LETTERED,
    DEFERRED,
    DUPLICATE,
    EXPIRED,
    CANCELLED,
    LIMITED,
)

#: The order of the statuses within one attempt. An attempt's end (rank 3)
#: outranks its start, which outranks a deferral and the enqueue.
STATUS_RANK = {
    QUEUED: 0,
    DEFERRED: 1,
    LIMITED: 1,
    RUNNING: 2,
    SUCCEEDED: 3,
    RETRYING: 3,
    FAILED: 3,
    DEAD_LETTERED: 3,
    DUPLICATE: 3,
    EXPIRED: 3,
    CANCELLED: 3,
}
#: A job in one of these statuses is sent again with a fresh receive count
#: (deferral re-sends it, a redrive moves it back, a retry sends it again): a
#: new delivery's ``running`` or ``deferred`` applies whatever its attempt.
RESTARTING = frozenset({DEFERRED, LIMITED, DEAD_LETTERED, FAILED})
RESTARTS = frozenset({RUNNING, DEFERRED, LIMITED})
#: Statuses after which the job is done (``finished_at`` is set): no later
#: write changes such a record, but a restart of a dead-lettered one.
FINAL = frozenset({SUCCEEDED, FAILED, DEAD_LETTERED, DUPLICATE, EXPIRED, CANCELLED})

#: A progress update: changes ``progress`` and ``progress_message`` only.
PROGRESS = "progress"

#: A ``status`` filter of ``recent``: one status, or any of several.
StatusFilter: t.TypeAlias = str | cabc.Collection[str] | None


@dataclasses.dataclass(frozen=True)
class JobRecord:
    """What a store knows about one job (``jobs.get_job(job_id)``)."""

    job_id: str
    job_type: str
    #: The logical queue name.
    queue: str
    #: One of ``queued``, ``running``, ``succeeded``, ``retrying``, ``failed``,
    #: ``dead_lettered``, ``deferred``, ``duplicate``, ``expired``, ``cancelled``,
    #: ``limited``.
    status: str
    #: The receive count of the job's latest delivery (0 while queued).
    attempts: int
    enqueued_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    #: The handler's JSON return value (on success).
    result: t.Any
    #: ``ErrorType: message`` of the latest failure.
    error: str | None
    #: The fraction done, 0..1, from ``current_job.set_progress``.
    progress: float | None
    progress_message: str | None = None
    updated_at: dt.datetime | None = None
    #: The job's tags (``tags=`` at enqueue).
    tags: tuple[str, ...] = ()
    #: A failed or dead-lettered job's payload (``SQS_JOBS_RECORD_FAILED_PAYLOADS``),
    #: to run it again; None otherwise.
    payload: t.Any = None

    def as_dict(self) -> dict[str, t.Any]:
        """The record as JSON-ready values (times in ISO 8601)."""
        return json_dict(self)


@dataclasses.dataclass(frozen=True)
class JobEvent:
    """One write to a job's record: a transition, or a progress update."""

    job_id: str
    job_type: str
    queue: str
    #: The new status, or :data:`PROGRESS` for a progress update.
    status: str
    attempts: int
    #: When it happened (the record's ``updated_at``).
    at: dt.datetime
    enqueued_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    #: The result as JSON text.
    result: str | None = None
    error: str | None = None
    progress: float | None = None
    progress_message: str | None = None
    #: The job's tags, written with the record (its first write that has them).
    tags: tuple[str, ...] = ()
    #: A failed job's payload as JSON text (kept with the record), or None.
    payload: str | None = None
    #: Set on events folded into one (:func:`merge_events`) whose first
    #: applies over a deferred or dead-lettered record.
    restarted: bool = False

    @property
    def may_restart(self) -> bool:
        """Whether it applies over a deferred or dead-lettered record, whatever
        its attempt: a new delivery's ``running`` or ``deferred``."""
        return self.status in RESTARTS or self.restarted

    @property
    def written_status(self) -> str:
        """The status the record has after this write."""
        return RUNNING if self.status == PROGRESS else self.status


@dataclasses.dataclass(frozen=True)
class RefusedWrite:
    """A write a store refused: the job id's record belongs to another job type."""

    job_id: str
    #: The record's job type (its first write's).
    recorded_job_type: str
    #: The refused write's job type.
    job_type: str


@dataclasses.dataclass(frozen=True)
class JobSearch:
    """A checked search of job records (made by ``job_search``): every filter
    given must match; times compare with the record's ``updated_at``."""

    tag: str | None = None
    job_type: str | None = None
    statuses: frozenset[str] | None = None
    #: Updated at or after ``since`` and before ``until`` (aware, UTC).
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 50


@dataclasses.dataclass(frozen=True)
class MinuteCount:
    """How many records of one queue and status finished within one minute."""

    #: The minute's start (aware UTC).
    minute: dt.datetime
    queue: str
    status: str
    count: int


class JobRecords(t.Protocol):
    """The job records of a store (``store.job_records()``)."""

    def write(self, events: cabc.Sequence[JobEvent]) -> list[RefusedWrite]:
        """Apply ``events`` in order, each an upsert that never goes backwards.

        Returns the writes refused because the record is another job type's.
        """

    def get(self, job_id: str) -> JobRecord | None:
        """The record of ``job_id``, or None."""

    def recent(
        self, limit: int = 50, *, status: StatusFilter = None, queue: str | None = None
    ) -> list[JobRecord]:
        """The most recently updated records, newest first.

        :param status: only records with this status, or with any of these
            (``("failed", "dead_lettered")``).
        """

    def find(self, search: JobSearch) -> list[JobRecord]:
        """The records that match ``search``, newest updated first, from an index."""

    def finished_per_minute(self, since: dt.datetime) -> list[MinuteCount]:
        """Count the jobs finished from ``since``'s minute on, per minute, queue
        and status (one entry per non-empty group, in no particular order).

        Each write that moved a record into a final status counts once, at
        its ``finished_at``: a job redriven and finished again counts twice.
        """

    def prune(self, older_than: dt.datetime, limit: int | None = None) -> int:
        """Delete records not updated since ``older_than``; return how many.

        :param limit: delete about that many at most (None: all of them).
        """


def merge_events(events: cabc.Iterable[JobEvent]) -> list[JobEvent]:
    """Fold a batch of in-order events into one per job, as the store would apply them.

    A worker's ``queued``, ``running`` and ``succeeded`` of one job that
    wait in the same batch then cost one write instead of three. Events of
    one job id but another job type are never folded together.
    """
    latest: dict[tuple[str, str], JobEvent] = {}
    for event in events:
        key = (event.job_id, event.job_type)
        before = latest.get(key)
        latest[key] = event if before is None else _fold(before, event)
    return list(latest.values())


def in_rounds(events: cabc.Iterable[JobEvent]) -> list[list[JobEvent]]:
    """Split merged events into rounds of distinct job ids, in order: a job id
    written under two job types in one batch is written twice, first one first."""
    rounds: list[list[JobEvent]] = []
    last_round: dict[str, int] = {}
    for event in events:
        index = last_round.get(event.job_id, -1) + 1
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(event)
        last_round[event.job_id] = index
    return rounds


def applies(new: JobEvent, old: JobEvent) -> bool:
    """Whether ``new`` may replace ``old``: the stores' write condition."""
    if new.job_type != old.job_type:
        return False
    if new.may_restart and old.written_status in RESTARTING:
        return True
    if old.written_status in FINAL:
        return False
    return (new.attempts, STATUS_RANK[new.written_status]) >= (
        old.attempts,
        STATUS_RANK[old.written_status],
    )


def _fold(old: JobEvent, new: JobEvent) -> JobEvent:
    if new.status == PROGRESS:
        if old.written_status == RUNNING:
            return dataclasses.replace(
                old,
                progress=new.progress,
                progress_message=new.progress_message,
                at=new.at,
            )
        return new if STATUS_RANK[old.status] < STATUS_RANK[RUNNING] else old
    if not applies(new, old):
        return old
    changes: dict[str, t.Any] = {
        "enqueued_at": new.enqueued_at or old.enqueued_at,
        "tags": new.tags or old.tags,
    }
    if new.attempts == old.attempts and old.may_restart:
        changes["restarted"] = True
    if new.status != RUNNING and new.attempts == old.attempts:
        changes["started_at"] = old.started_at or new.started_at
        if new.progress is None:
            changes["progress"] = old.progress
            changes["progress_message"] = old.progress_message
    return dataclasses.replace(new, **changes)


def minute_of(at: dt.datetime) -> dt.datetime:
    """The start of ``at``'s minute, in UTC."""
    return at.astimezone(dt.UTC).replace(second=0, microsecond=0)


def json_dict(record: t.Any) -> dict[str, t.Any]:
    return {
        field.name: _json_value(getattr(record, field.name))
        for field in dataclasses.fields(record)
    }


def _json_value(value: object) -> object:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value
