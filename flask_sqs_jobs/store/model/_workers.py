"""Live workers: what the stores keep of each worker process."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

from ._records import json_dict


@dataclasses.dataclass(frozen=True)
class WorkerRecord:
    """One worker process, as it registered itself."""

    #: ``host:pid:random``.
    worker_id: str
    host: str
    pid: int
    #: The logical queue names it polls.
    queues: tuple[str, ...]
    concurrency: int
    busy_slots: int
    started_at: dt.datetime
    last_seen_at: dt.datetime
    #: The flask-sqs-jobs version it runs.
    version: str

    def is_lost(self, now: dt.datetime, stale_after: float) -> bool:
        """Whether it has not refreshed its row for ``stale_after`` seconds."""
        return (now - self.last_seen_at).total_seconds() > stale_after

    def as_dict(self) -> dict[str, t.Any]:
        """The record as JSON-ready values (times in ISO 8601)."""
        return json_dict(self)


class WorkerRegistry(t.Protocol):
    """The live workers of a store (``store.worker_registry()``)."""

    def register(self, worker: WorkerRecord) -> None:
        """Add or replace ``worker``'s row."""

    def refresh(self, worker_id: str, busy_slots: int, at: dt.datetime) -> bool:
        """Update ``last_seen_at`` and ``busy_slots``; False when the row is gone."""

    def remove(self, worker_id: str) -> None:
        """Delete ``worker_id``'s row (a graceful stop)."""

    def list(self) -> list[WorkerRecord]:
        """Every registered worker, lost ones included, oldest first."""

    def prune_lost(self, older_than: dt.datetime) -> int:
        """Delete the workers not refreshed since ``older_than``; return how many."""
