"""The job store in a SQL database (SQLite or PostgreSQL), through SQLAlchemy."""

from __future__ import annotations

from ._sqlalchemy import SQLAlchemyStore
from ._tables import outbox as outbox_table
from ._tables import schedule_ticks as schedule_ticks_table
from ._workflow_tables import batch_counts as batch_counts_table
from ._workflow_tables import batch_jobs as batch_jobs_table
from ._workflow_tables import batches as batches_table
from ._workflow_tables import chains as chains_table

__all__ = [
    "SQLAlchemyStore",
    "batch_counts_table",
    "batch_jobs_table",
    "batches_table",
    "chains_table",
    "outbox_table",
    "schedule_ticks_table",
]
