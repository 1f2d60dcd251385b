"""The example's own table, in the same SQLite database as the job store."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs.store import SQLAlchemyStore

from .extensions import jobs

metadata = sa.MetaData()

users = sa.Table(
    "example_users",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("email", sa.String(320), nullable=False, unique=True),
)


def database(app: Flask | None = None) -> SQLAlchemyStore:
    """The job store, whose SQLite database holds the example's table too."""
    store = jobs.store(app)
    assert isinstance(store, SQLAlchemyStore), "the example runs on a SQL store"
    return store
