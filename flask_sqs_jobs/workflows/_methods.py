"""``jobs.batch``, ``jobs.chain``, ``jobs.get_batch``, ``jobs.get_chain`` on SQSJobs."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from ._signature import Signature
from ._store import sql_store

if t.TYPE_CHECKING:
    from flask import Flask

    from ._batches import Batch
    from ._chains import Chain
    from ._records import BatchRecord
    from ._records import ChainRecord


class Workflows:
    """The workflow methods of :class:`~flask_sqs_jobs.SQSJobs` (SQL stores)."""

    def batch(
        self,
        children: cabc.Sequence[Signature],
        *,
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
        on_failure: Signature | None = None,
        description: str | None = None,
    ) -> Batch:
        """Declare a batch of children whose callbacks each run once.

        ``on_complete`` runs when every child has finished (succeeded or
        failed for good), ``on_success`` when all succeeded, ``on_failure``
        when the first child fails for good; each gets ``batch_id=``. Send
        it with ``.enqueue(session=None)``.

        :raises RuntimeError: the app has no SQL job store.
        :raises TypeError, ValueError: a child or callback is wrong.
        """
        from ._batches import Batch

        sql_store(self, "jobs.batch()")
        return Batch(
            self,
            children,
            on_success=on_success,
            on_complete=on_complete,
            on_failure=on_failure,
            description=description,
        )

    def chain(self, *steps: Signature, pass_result: bool = False) -> Chain:
        """Declare steps that run one after another; send with ``.enqueue()``.

        :raises RuntimeError: the app has no SQL job store.
        :raises TypeError, ValueError: a step is wrong.
        """
        from ._chains import Chain

        sql_store(self, "jobs.chain()")
        return Chain(self, steps, pass_result=pass_result)

    def get_batch(
        self, batch_id: str, *, app: Flask | None = None
    ) -> BatchRecord | None:
        """The batch's record: counts, status, failures; None if unknown."""
        from ._records import read_batch

        return read_batch(sql_store(self, "jobs.get_batch()", app).engine, batch_id)

    def get_chain(
        self, chain_id: str, *, app: Flask | None = None
    ) -> ChainRecord | None:
        """The chain's record: steps, the current one, status; None if unknown."""
        from ._records import read_chain

        return read_chain(sql_store(self, "jobs.get_chain()", app).engine, chain_id)
