"""Batches: children written with their batch in one transaction; callbacks once.

:class:`Batch` is what ``jobs.batch(...)`` declares. Its :meth:`Batch.enqueue`
writes the batch row, a row per child and the children's outbox rows in one
transaction (the caller's ``session=``, or one of its own on the store).
:func:`record_child` counts a child's final outcome: the child's row leaves
``pending`` by a conditional update, so a child counts once however often it
is delivered, and the batch's counts move in the same transaction, which
also writes the due callbacks' outbox rows (:func:`send_due`).
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import dataclasses
import typing as t

import sqlalchemy as sa

from ..engine.model import new_job_id
from ..store.sql import batch_jobs_table as batch_jobs
from ..store.sql import batches_table as batches
from ._signature import BATCH_FIELD
from ._signature import send_signature
from ._signature import Signature
from ._store import in_transaction
from ._store import now

#: The keyword argument each callback gets.
BATCH_ARGUMENT = "batch_id"
RUNNING, SUCCEEDED, FAILED, COMPLETED = "running", "succeeded", "failed", "completed"
PENDING = "pending"


@dataclasses.dataclass(frozen=True)
class EnqueuedBatch:
    """A batch written (and, once its transaction commits, sent)."""

    batch_id: str
    #: The children's job ids, in the order given.
    job_ids: list[str]


class Batch:
    """Children whose callbacks run once: ``jobs.batch(children, ...)``.

    Checked when declared: children and callbacks are signatures, and each
    callback's task takes ``batch_id=``.
    """

    def __init__(
        self,
        jobs: t.Any,
        children: cabc.Sequence[Signature],
        *,
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
        on_failure: Signature | None = None,
        description: str | None = None,
    ) -> None:
        children = list(children)
        if not children:
            raise ValueError("a batch needs at least one child")
        for index, child in enumerate(children):
            if not isinstance(child, Signature):
                raise TypeError(
                    f"children[{index}] must be a Signature (task.s(...)); got"
                    f" {type(child).__name__}"
                )
            child.check_complete(f"children[{index}]")
        given = {
            "on_success": on_success,
            "on_complete": on_complete,
            "on_failure": on_failure,
        }
        self.callbacks: dict[str, Signature] = {}
        for name, callback in given.items():
            if callback is None:
                continue
            if not isinstance(callback, Signature):
                raise TypeError(f"{name} must be a Signature (task.s(...))")
            callback.check_complete(name, supplied=[BATCH_ARGUMENT])
            self.callbacks[name] = callback
        if description is not None and not isinstance(description, str):
            raise TypeError("description must be a string or None")
        self.jobs = jobs
        self.children = children
        self.description = description

    def enqueue(self, *, session: t.Any = None) -> EnqueuedBatch:
        """Write the batch and its children; they are sent when ``session`` commits.

        Without ``session`` the batch is written (and sent) in a transaction
        of its own on the store's database.
        """
        return in_transaction(self.jobs, session, self._write)

    def _write(self, session: t.Any) -> EnqueuedBatch:
        batch_id = new_job_id()
        job_ids = [new_job_id() for _ in self.children]
        stamp = now()
        session.execute(
            sa.insert(batches).values(
                batch_id=batch_id,
                description=self.description,
                status=RUNNING,
                total=len(self.children),
                pending=len(self.children),
                succeeded=0,
                failed=0,
                callbacks={k: v.as_json() for k, v in self.callbacks.items()},
                callbacks_sent=[],
                created_at=stamp,
            )
        )
        session.execute(
            sa.insert(batch_jobs),
            [
                {
                    "batch_id": batch_id,
                    "job_id": job_id,
                    "job_type": child.job_type,
                    "status": PENDING,
                }
                for child, job_id in zip(self.children, job_ids, strict=True)
            ],
        )
        by_queue: dict[str, list[dict[str, t.Any]]] = collections.defaultdict(list)
        for child, job_id in zip(self.children, job_ids, strict=True):
            options = dict(child.enqueue_options)
            fields = {**(options.pop("correlation_fields", None) or {})}
            fields[BATCH_FIELD] = batch_id
            by_queue[child.queue].append(
                {
                    "job_type": child.job_type,
                    "payload": child.payload,
                    "job_id": job_id,
                    "correlation_fields": fields,
                    **options,
                }
            )
        for queue, specs in by_queue.items():
            self.jobs.enqueue_many(queue, specs, session=session)
        return EnqueuedBatch(batch_id, job_ids)


def record_child(
    session: t.Any, batch_id: str, job_id: str, succeeded: bool, error: str | None
) -> list[tuple[str, Signature]]:
    """Count a child's final outcome in ``session``; return the callbacks now due.

    A child counts once: its row moves from ``pending`` (or, for a success
    after a redrive, from ``failed``) by a conditional update, and only the
    transaction that moved it changes the batch's counts. The batch's row,
    which every child of the batch updates, is updated last and once (its
    status computed in the statement), so its lock is held only until the
    commit. Nothing is committed here.
    """
    found = _move_child(session, batch_id, job_id, succeeded, error)
    if found is None:
        return []
    column = batches.c
    pending = column.pending - (1 if found == PENDING else 0)
    failed = column.failed + (0 if succeeded else 1) - (1 if found == FAILED else 0)
    values: dict[str, t.Any] = {
        "pending": pending,
        "failed": failed,
        "status": sa.case(
            (pending > 0, sa.case((failed > 0, FAILED), else_=RUNNING)),
            else_=sa.case((failed > 0, COMPLETED), else_=SUCCEEDED),
        ),
    }
    if succeeded:
        values["succeeded"] = column.succeeded + 1
    if found == PENDING:
        values["finished_at"] = sa.case((pending == 0, now()), else_=None)
    row = session.execute(
        sa.update(batches)
        .where(column.batch_id == batch_id)
        .values(**values)
        .returning(
            column.pending, column.failed, column.callbacks, column.callbacks_sent
        )
    ).one_or_none()
    if row is None:
        return []
    sent = list(row.callbacks_sent or [])
    due = []
    if not succeeded and row.failed == 1:
        due.append("on_failure")
    if row.pending == 0:
        due += ["on_complete"] + (["on_success"] if row.failed == 0 else [])
    declared = row.callbacks or {}
    due = [name for name in due if name not in sent and name in declared]
    if due:
        session.execute(
            sa.update(batches)
            .where(column.batch_id == batch_id)
            .values(callbacks_sent=sent + due)
        )
    return [(name, Signature.from_json(declared[name])) for name in due]


def _move_child(
    session: t.Any, batch_id: str, job_id: str, succeeded: bool, error: str | None
) -> str | None:
    """Move the child's row to its outcome; the status it left (None: none moved)."""
    child = batch_jobs.c
    status = SUCCEEDED if succeeded else FAILED
    for left in [PENDING, FAILED] if succeeded else [PENDING]:
        moved = session.execute(
            sa.update(batch_jobs)
            .where(
                child.batch_id == batch_id,
                child.job_id == job_id,
                child.status == left,
            )
            .values(status=status, error=error, finished_at=now())
        )
        if moved.rowcount == 1:
            return left
    return None


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
