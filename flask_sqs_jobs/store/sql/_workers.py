"""Live workers in ``sqs_jobs_workers``: one row per worker process."""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from .. import model as r
from ._records import dialect_insert
from ._tables import reading
from ._tables import workers


class SQLWorkerRegistry:
    """The live workers (a ``WorkerRegistry``) in ``sqs_jobs_workers``.

    Each row is written only by its own worker's presence thread (one
    statement per call, its own transaction); the dashboard and
    ``flask sqs-jobs workers`` list them.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._insert = dialect_insert(engine)

    def register(self, worker: r.WorkerRecord) -> None:
        """Upsert the worker's row (a re-register after it vanished overwrites)."""
        values = {
            "worker_id": worker.worker_id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": json.dumps(list(worker.queues)),
            "concurrency": worker.concurrency,
            "busy_slots": worker.busy_slots,
            "started_at": worker.started_at,
            "last_seen_at": worker.last_seen_at,
            "version": worker.version,
        }
        stmt = self._insert(workers).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[workers.c.worker_id],
            set_={name: stmt.excluded[name] for name in values if name != "worker_id"},
        )
        with self._engine.begin() as connection:
            connection.execute(stmt)

    def refresh(self, worker_id: str, busy_slots: int, at: dt.datetime) -> bool:
        """Update the row; False when it is gone (the caller registers again)."""
        with self._engine.begin() as connection:
            result = connection.execute(
                sa.update(workers)
                .where(workers.c.worker_id == worker_id)
                .values(busy_slots=busy_slots, last_seen_at=at)
            )
        return bool(result.rowcount)

    def remove(self, worker_id: str) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                sa.delete(workers).where(workers.c.worker_id == worker_id)
            )

    def prune_lost(self, older_than: dt.datetime) -> int:
        """Delete the rows not refreshed since ``older_than`` (lost workers);
        return how many. One ``DELETE``; every worker runs it about once an
        hour, and a row deleted twice is harmless."""
        with self._engine.begin() as connection:
            result = connection.execute(
                sa.delete(workers).where(workers.c.last_seen_at < older_than)
            )
        return int(result.rowcount or 0)

    def list(self) -> list[r.WorkerRecord]:
        with reading(self._engine) as connection:
            rows = connection.execute(
                sa.select(workers).order_by(workers.c.started_at, workers.c.worker_id)
            ).all()
        return [_worker_record(row._mapping) for row in rows]


def _worker_record(row: sa.RowMapping) -> r.WorkerRecord:
    return r.WorkerRecord(
        worker_id=row["worker_id"],
        host=row["host"],
        pid=row["pid"],
        queues=tuple(json.loads(row["queues"])),
        concurrency=row["concurrency"],
        busy_slots=row["busy_slots"],
        started_at=row["started_at"],
        last_seen_at=row["last_seen_at"],
        version=row["version"],
    )
