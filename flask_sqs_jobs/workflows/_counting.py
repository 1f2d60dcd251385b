"""A batch child's final outcome, counted once; the callbacks it makes due.

The child's row leaves ``pending`` by a conditional update, so a child
counts once however often it is delivered; only the transaction that moved
it changes the counts. The counts are spread over a batch's count rows (the
child's ``shard``), so children do not all wait on one row's lock; the
batch's own row is updated only when a count row's last child finishes,
when the first child fails, and after a redrive. The transaction that takes
the batch's ``shards_left`` to 0 finished the batch. The due callbacks'
outbox rows are written in the same transaction (:func:`send_due`); each is
named in ``callbacks_sent`` by a write under the batch row's lock.
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from ..engine.model import new_job_id
from ..store.sql import batch_counts_table as batch_counts
from ..store.sql import batch_jobs_table as batch_jobs
from ..store.sql import batches_table as batches
from ._batches import BATCH_ARGUMENT
from ._batches import PENDING
from ._signature import BATCH_FIELD
from ._signature import send_signature
from ._signature import Signature
from ._store import in_transaction
from ._store import now

SUCCEEDED, FAILED = "succeeded", "failed"


def record_child(
    session: t.Any, batch_id: str, job_id: str, succeeded: bool, error: str | None
) -> list[tuple[str, Signature]]:
    """Count a child's final outcome in ``session``; return the callbacks now due.

    A success may also move a failed child (a redrive). Nothing is
    committed here.
    """
    moved = _move_child(session, batch_id, job_id, succeeded, error)
    if moved is None:
        return []
    left, shard = moved
    batch = batches.c
    where = batch.batch_id == batch_id
    if left == FAILED:
        # A redrive: serialised on the batch's row, so the last one sees no failure.
        session.execute(sa.select(batch.batch_id).where(where).with_for_update())
    counts = batch_counts.c
    pending = session.execute(
        sa.update(batch_counts)
        .where(counts.batch_id == batch_id, counts.shard == shard)
        .values(
            pending=counts.pending - (1 if left == PENDING else 0),
            succeeded=counts.succeeded + (1 if succeeded else 0),
            failed=counts.failed
            + (0 if succeeded else 1)
            - (1 if left == FAILED else 0),
        )
        .returning(counts.pending)
    ).scalar_one()
    due = []
    if not succeeded:
        first = session.execute(
            sa.update(batches)
            .where(where, batch.failure_seen.is_(False))
            .values(failure_seen=True)
        )
        if first.rowcount == 1:
            due.append("on_failure")
    finished = False
    if left == PENDING and pending == 0:
        shards_left = session.execute(
            sa.update(batches)
            .where(where)
            .values(shards_left=batch.shards_left - 1)
            .returning(batch.shards_left)
        ).scalar_one()
        finished = shards_left == 0
        if finished:
            due.append("on_complete")
    if not due and left != FAILED:
        return []
    # The batch's row is locked by now (updated, or read for update).
    row = session.execute(
        sa.select(batch.callbacks, batch.callbacks_sent, batch.shards_left).where(where)
    ).one()
    if (finished or (left == FAILED and row.shards_left == 0)) and not _failures(
        session, batch_id
    ):
        due.append("on_success")
    sent, declared = list(row.callbacks_sent or []), row.callbacks or {}
    due = [name for name in due if name not in sent and name in declared]
    if due or finished:
        values: dict[str, t.Any] = {"callbacks_sent": sent + due}
        if finished:
            values["finished_at"] = now()
        session.execute(sa.update(batches).where(where).values(**values))
    return [(name, Signature.from_json(declared[name])) for name in due]


def _move_child(
    session: t.Any, batch_id: str, job_id: str, succeeded: bool, error: str | None
) -> tuple[str, int] | None:
    """Move the child's row to its outcome: (the status it left, its shard)."""
    child = batch_jobs.c
    status = SUCCEEDED if succeeded else FAILED
    for left in [PENDING, FAILED] if succeeded else [PENDING]:
        shard = session.execute(
            sa.update(batch_jobs)
            .where(
                child.batch_id == batch_id,
                child.job_id == job_id,
                child.status == left,
            )
            .values(status=status, error=error, finished_at=now())
            .returning(child.shard)
        ).scalar_one_or_none()
        if shard is not None:
            return left, int(shard)
    return None


def _failures(session: t.Any, batch_id: str) -> int:
    counts = batch_counts.c
    total = session.execute(
        sa.select(sa.func.sum(counts.failed)).where(counts.batch_id == batch_id)
    ).scalar_one()
    return int(total or 0)


def send_due(
    jobs: t.Any, session: t.Any, batch_id: str, due: list[tuple[str, Signature]]
) -> None:
    """Write the due callbacks' outbox rows in ``session`` (``batch_id=`` added).

    Each callback's job id is the batch's and its name: one job per callback.
    """
    for name, callback in due:
        send_signature(
            jobs,
            callback,
            session=session,
            extra={BATCH_ARGUMENT: batch_id},
            job_id=f"{batch_id}.{name}",
        )


class RunningBatch:
    """``current_job.batch`` in a running child: add children to its batch."""

    def __init__(self, jobs: t.Any, batch_id: str) -> None:
        self.jobs = jobs
        self.batch_id = batch_id

    def add(self, signature: Signature, *, session: t.Any = None) -> str:
        """Add ``signature`` as a child of the batch; return its job id.

        The batch cannot complete meanwhile: the running child is pending.
        Written with the child's outbox row in one transaction (``session``'s).

        :raises TypeError: not a complete signature.
        """
        if not isinstance(signature, Signature):
            raise TypeError("batch.add() takes a Signature (task.s(...))")
        signature.check_complete("batch.add()")
        return in_transaction(self.jobs, session, lambda own: self._add(own, signature))

    def _add(self, session: t.Any, signature: Signature) -> str:
        job_id = new_job_id()
        session.execute(
            sa.insert(batch_jobs).values(
                batch_id=self.batch_id,
                job_id=job_id,
                job_type=signature.job_type,
                shard=0,
                status=PENDING,
            )
        )
        counts, batch = batch_counts.c, batches.c
        pending = session.execute(
            sa.update(batch_counts)
            .where(counts.batch_id == self.batch_id, counts.shard == 0)
            .values(pending=counts.pending + 1)
            .returning(counts.pending)
        ).scalar_one()
        reopened = 1 if pending == 1 else 0  # count row 0 had finished
        grown = session.execute(
            sa.update(batches)
            .where(batch.batch_id == self.batch_id, batch.shards_left > 0)
            .values(total=batch.total + 1, shards_left=batch.shards_left + reopened)
        )
        if grown.rowcount != 1:
            raise RuntimeError(f"batch {self.batch_id} has completed")
        send_signature(
            self.jobs,
            signature,
            session=session,
            job_id=job_id,
            correlation_fields={BATCH_FIELD: self.batch_id},
        )
        return job_id
