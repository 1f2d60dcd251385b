"""What every job store offers the rest of the jobs layer."""

from __future__ import annotations

import abc
import typing as t

if t.TYPE_CHECKING:
    from ...engine.flow import LimitStore
    from ...engine.model import IdempotencyKeys
    from ...engine.unique import UniqueKeys
    from ._cancellations import Cancellations
    from ._records import JobRecords
    from ._workers import WorkerRegistry


class JobStore(abc.ABC):
    """Where the jobs layer keeps its state: a SQL database or a DynamoDB table.

    Each feature that needs a store talks to one part of it (the outbox, the
    idempotency keys, ...); a store that lacks a part says so when the part is
    first asked for.
    """

    #: A short name for logs and errors: ``"sqlalchemy"`` or ``"dynamodb"``.
    kind: str = ""

    @abc.abstractmethod
    def create_tables(self) -> list[str]:
        """Create whatever is missing (tables, indexes); leave the rest unchanged.

        Idempotent. Returns one line per table for ``flask sqs-jobs store init``.
        """

    def idempotency_keys(self) -> IdempotencyKeys:
        """The idempotency keys of this store, for idempotent handlers."""
        raise NotImplementedError(
            f"the {self.kind or type(self).__name__} store keeps no idempotency keys"
        )

    def unique_keys(self) -> UniqueKeys:
        """The keys unique jobs hold from their enqueue until released."""
        raise NotImplementedError(
            f"the {self.kind or type(self).__name__} store keeps no unique keys"
        )

    def limits(self) -> LimitStore:
        """The token buckets and permits of this store, for ``limits=[...]``."""
        raise NotImplementedError(
            f"the {self.kind or type(self).__name__} store keeps no limits"
        )

    def close(self) -> None:
        """Release connections (pools, clients); the store may be used again."""
        return None

    def describe(self) -> str:
        """Where the store lives, without credentials, for logs and the CLI."""
        return self.kind

    def job_records(self, *, retention_seconds: float = 604800) -> JobRecords:
        """The store's job records (statuses, results, progress).

        :param retention_seconds: how long a record is kept after its last
            write, where the store expires records itself (DynamoDB's TTL);
            SQL stores are pruned by the workers instead.
        """
        raise NotImplementedError(f"a {self.kind} store keeps no job records")

    def worker_registry(self) -> WorkerRegistry:
        """The store's registry of live workers."""
        raise NotImplementedError(f"a {self.kind} store keeps no worker registry")

    def cancellations(self) -> Cancellations:
        """The store's tombstones of cancelled jobs (``jobs.cancel``)."""
        raise NotImplementedError(f"a {self.kind} store keeps no cancellations")

    def schedule_ticks(self) -> t.Any:
        """The ticks of periodic jobs that workers claimed (each claimed once).

        Its shape follows the store's way of claiming (a row in the job's
        transaction on SQL; a pending, then sent, item on DynamoDB): the
        periodic scheduler knows both.
        """
        raise NotImplementedError(f"a {self.kind} store keeps no schedule ticks")
