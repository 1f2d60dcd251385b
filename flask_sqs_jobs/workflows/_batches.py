"""Batches: children written with their batch in one transaction; callbacks once.

:class:`Batch` is what ``jobs.batch(...)`` declares. Its :meth:`Batch.enqueue`
writes the batch row, its count rows, a row per child and the children's
outbox rows in one transaction (the caller's ``session=``, or one of its own
on the store). ``_counting`` counts each child's final outcome.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import dataclasses
import typing as t

import sqlalchemy as sa

from ..engine.model import new_job_id
from ..store.sql import batch_counts_table as batch_counts
from ..store.sql import batch_jobs_table as batch_jobs
from ..store.sql import batches_table as batches
from ._signature import BATCH_FIELD
from ._signature import Signature
from ._store import in_transaction
from ._store import now

#: The keyword argument each callback gets.
BATCH_ARGUMENT = "batch_id"
PENDING = "pending"
#: A batch's counts are spread over at most this many rows.
SHARDS = 8


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
        shard_of = [n % SHARDS for n in range(len(self.children))]
        shards = collections.Counter(shard_of)
        session.execute(
            sa.insert(batches).values(
                batch_id=batch_id,
                description=self.description,
                total=len(self.children),
                shards_left=len(shards),
                failure_seen=False,
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
                    "shard": shard,
                    "status": PENDING,
                }
                for child, job_id, shard in zip(
                    self.children, job_ids, shard_of, strict=True
                )
            ],
        )
        session.execute(
            sa.insert(batch_counts),
            [
                {
                    "batch_id": batch_id,
                    "shard": shard,
                    "pending": pending,
                    "succeeded": 0,
                    "failed": 0,
                }
                for shard, pending in shards.items()
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
