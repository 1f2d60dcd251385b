"""Fixtures of the unique-job tests: an app with a store, a worker in a thread
(those of idempotent handlers), job records off."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store.outbox import flush_all

from tests.idempotency.conftest import dlq_url
from tests.idempotency.conftest import queue_url
from tests.idempotency.conftest import run_worker
from tests.store.conftest import dynamodb_client
from tests.store.conftest import dynamodb_endpoint
from tests.store.conftest import table_name

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

__all__ = [
    "dlq_url",
    "dynamodb_client",
    "dynamodb_endpoint",
    "queue_url",
    "run_worker",
    "store_app",
    "table_name",
]


@pytest.fixture
def store_app(
    sqs: SQSClient, queue_url: str, store_url: str, jobs: SQSJobs
) -> cabc.Iterator[Flask]:
    """An app whose ``default`` queue (``idem-jobs``) has a DLQ, with a store."""
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "idem-jobs"}},
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs.init_app(app)
    jobs.store(app).create_tables()
    yield app
    flush_all()  # the sends after commit end before the store closes
    jobs.store(app).close()
