"""Cancellations: a tombstone per cancelled job, written by ``jobs.cancel``.

A tombstone is written once, by a conditional write (a second cancel of the
same job finds it there and changes nothing). Workers read tombstones when a
job arrives and, for the jobs they run, in one batched read per heartbeat
(:class:`~flask_sqs_jobs.engine.flow.CancelWatch`). Tombstones are forgotten
after :data:`TOMBSTONE_RETENTION_SECONDS`, longer than SQS keeps a message.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

#: How long a tombstone is kept: 14 days (SQS's longest message retention)
#: plus a day. A job deferred for longer is re-sent, and checked, before then.
TOMBSTONE_RETENTION_SECONDS = 15 * 86400
#: Tombstones read in one store call at most (DynamoDB's BatchGetItem).
MAX_READ_BATCH = 100


class Cancellations(t.Protocol):
    """A store's tombstones: written by ``jobs.cancel``, read by workers."""

    def cancel(self, job_id: str) -> bool:
        """Write ``job_id``'s tombstone unless it has one; True when written now."""
        ...

    def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
        """The ids among ``job_ids`` that have a tombstone."""
        ...
