"""Stores for the record tests: SQLite, PostgreSQL and DynamoDB (moto_server)."""

from __future__ import annotations

import collections.abc as cabc
import pathlib
import typing as t
import uuid

import boto3
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.store import conftest as store_fixtures

# moto's threaded server can let two racing conditional writes of one record
# both succeed; this one serves a request at a time, as DynamoDB orders them.
dynamodb_endpoint = store_fixtures.dynamodb_endpoint


@pytest.fixture
def dynamodb_store(dynamodb_endpoint: str) -> DynamoDBStore:
    """A DynamoDBStore with a fresh table of its own."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    store = DynamoDBStore(f"jobs-{uuid.uuid4().hex[:12]}", boto_client=client)
    store.create_tables()
    return store


@pytest.fixture(params=["sqlite", "postgresql", "dynamodb"])
def store(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> cabc.Iterator[JobStore]:
    """A fresh store with its tables, of each kind."""
    if request.param == "dynamodb":
        yield request.getfixturevalue("dynamodb_store")
        return
    url = (
        f"sqlite:///{tmp_path / 'jobs.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    sql = SQLAlchemyStore(url)
    sql.create_tables()
    yield sql
    sql.close()


@pytest.fixture
def store_app(
    make_app: t.Any, jobs: SQSJobs, app_config: dict[str, t.Any], store_url: str
) -> cabc.Iterator[Flask]:
    """The test app over a fresh SQL store (SQLite, then PostgreSQL), current."""
    app = make_app({**app_config, "SQS_JOBS_STORE_URL": store_url})
    jobs.store(app).create_tables()
    with app.app_context():
        yield app
    jobs.store(app).close()
