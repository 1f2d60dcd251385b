"""The job store in one DynamoDB table."""

from __future__ import annotations

from ._store import DynamoDBStore

__all__ = [
    "DynamoDBStore",
]
