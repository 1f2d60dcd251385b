"""The job store in a SQL database (SQLite or PostgreSQL), through SQLAlchemy."""

from __future__ import annotations

from ._sqlalchemy import SQLAlchemyStore
from ._tables import outbox as outbox_table
from ._tables import schedule_ticks as schedule_ticks_table

__all__ = [
    "SQLAlchemyStore",
    "outbox_table",
    "schedule_ticks_table",
]
