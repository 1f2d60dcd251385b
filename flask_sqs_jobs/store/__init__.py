"""Job stores: where the jobs layer keeps what SQS cannot.

:class:`SQLAlchemyStore` (SQLite or PostgreSQL, the ``sqlalchemy`` extra; and
``postgres`` for psycopg) holds the transactional outbox, idempotency keys and,
as the jobs layer grows, job records, workers and schedule ticks.
:class:`DynamoDBStore` holds the same except the outbox, which needs the app's
own database. Both are imported lazily, so this package loads without
SQLAlchemy installed.
"""

from __future__ import annotations

import typing as t

from .model import JobRecord
from .model import JobStore
from .model import WorkerRecord

if t.TYPE_CHECKING:
    from .dynamodb import DynamoDBStore
    from .sql import SQLAlchemyStore

__all__ = [
    "DynamoDBStore",
    "JobRecord",
    "JobStore",
    "SQLAlchemyStore",
    "WorkerRecord",
]


def __getattr__(name: str) -> t.Any:
    if name == "SQLAlchemyStore":
        from .sql import SQLAlchemyStore

        return SQLAlchemyStore
    if name == "DynamoDBStore":
        from .dynamodb import DynamoDBStore

        return DynamoDBStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
