"""What ``jobs.get_batch`` and ``jobs.get_chain`` return: a workflow's record."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from ..store.sql import batch_counts_table as batch_counts
from ..store.sql import batch_jobs_table as batch_jobs
from ..store.sql import batches_table as batches
from ..store.sql import chains_table as chains

#: At most this many failed children are listed in a batch's record.
MAX_FAILURES_SHOWN = 100


class _Record:
    """What both records share: their times shown as ISO 8601."""

    def as_dict(self) -> dict[str, t.Any]:
        """The record as JSON-ready values (times in ISO 8601)."""
        fields = dataclasses.asdict(t.cast(t.Any, self))
        for name in ("created_at", "finished_at"):
            value = fields[name]
            fields[name] = None if value is None else value.isoformat()
        return fields


@dataclasses.dataclass(frozen=True)
class BatchRecord(_Record):
    """A batch as the store has it.

    ``status``: ``running`` (children pending, none failed), ``failed``
    (children pending, one or more failed), ``succeeded`` (every child
    succeeded) or ``completed`` (every child finished, some failed).
    ``failures``: ``{"job_id", "job_type", "error"}`` of failed children.
    """

    batch_id: str
    description: str | None
    status: str
    total: int
    pending: int
    succeeded: int
    failed: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    callbacks_sent: list[str]
    failures: list[dict[str, t.Any]]


@dataclasses.dataclass(frozen=True)
class ChainRecord(_Record):
    """A chain as the store has it.

    ``status``: ``running``, ``succeeded`` or ``failed`` (stopped at
    ``failed_step``, with ``error``); ``steps`` are the job types in order,
    ``job_ids`` the steps' job ids so far.
    """

    chain_id: str
    status: str
    steps: list[str]
    current_step: int
    job_ids: list[str]
    failed_step: int | None
    error: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


def read_batch(engine: sa.Engine, batch_id: str) -> BatchRecord | None:
    """The batch's record, or None when there is no such batch."""
    with engine.connect() as connection:
        row = _row(connection, batches, batch_id)
        if row is None:
            return None
        c = batch_counts.c
        pending, succeeded, failed = connection.execute(
            sa.select(
                sa.func.coalesce(sa.func.sum(c.pending), 0),
                sa.func.coalesce(sa.func.sum(c.succeeded), 0),
                sa.func.coalesce(sa.func.sum(c.failed), 0),
            ).where(c.batch_id == batch_id)
        ).one()
        child = batch_jobs.c
        failures = connection.execute(
            sa.select(child.job_id, child.job_type, child.error)
            .where(child.batch_id == batch_id, child.status == "failed")
            .order_by(child.finished_at)
            .limit(MAX_FAILURES_SHOWN)
        ).all()
    created = row.created_at
    assert created is not None
    return BatchRecord(
        batch_id=row.batch_id,
        description=row.description,
        status=_status(int(pending), int(failed)),
        total=row.total,
        pending=int(pending),
        succeeded=int(succeeded),
        failed=int(failed),
        created_at=created,
        finished_at=row.finished_at,
        callbacks_sent=list(row.callbacks_sent or []),
        failures=[
            {"job_id": f.job_id, "job_type": f.job_type, "error": f.error}
            for f in failures
        ],
    )


def _status(pending: int, failed: int) -> str:
    if pending:
        return "failed" if failed else "running"
    return "completed" if failed else "succeeded"


def read_chain(engine: sa.Engine, chain_id: str) -> ChainRecord | None:
    """The chain's record, or None when there is no such chain."""
    with engine.connect() as connection:
        row = _row(connection, chains, chain_id)
    if row is None:
        return None
    created = row.created_at
    assert created is not None
    return ChainRecord(
        chain_id=row.chain_id,
        status=row.status,
        steps=[str(step["job_type"]) for step in row.steps],
        current_step=row.current_step,
        job_ids=list(row.job_ids),
        failed_step=row.failed_step,
        error=row.error,
        created_at=created,
        finished_at=row.finished_at,
    )


def _row(connection: sa.Connection, table: sa.Table, key: str) -> t.Any:
    """The row of ``table`` whose primary key is ``key``, or None."""
    (column,) = table.primary_key.columns
    return connection.execute(sa.select(table).where(column == key)).one_or_none()
