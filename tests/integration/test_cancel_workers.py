"""Cancelling a running job in a real ``flask sqs-worker`` process, on every store."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import typing as t

import boto3
import pytest
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.support import message_count

from .conftest import FAKE_AWS_ENV
from .conftest import make_client
from .conftest import MakeQueue
from .conftest import REGION
from .conftest import ROOT
from .conftest import unique_name
from .helpers import wait_until
from .processes import WorkerProcess

APP = "tests.integration.cancel_app:create_app"


def _store_env(
    kind: str, request: pytest.FixtureRequest, sqs_endpoint: str
) -> dict[str, str]:
    """The app's store settings, its tables made: SQLite, PostgreSQL or DynamoDB."""
    if kind == "dynamodb":
        client = boto3.client("dynamodb", region_name=REGION, endpoint_url=sqs_endpoint)
        store = DynamoDBStore(unique_name("cancel"), boto_client=client)
        store.create_tables()
        return {
            "TEST_APP_DYNAMODB_TABLE": store.table_name,
            "AWS_ENDPOINT_URL_DYNAMODB": sqs_endpoint,
        }
    if kind == "sqlite":
        tmp_path: pathlib.Path = request.getfixturevalue("tmp_path")
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    sql = SQLAlchemyStore(url)
    sql.create_tables()
    sql.close()
    return {"TEST_APP_STORE_URL": url}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "dynamodb"])
def test_a_running_job_sees_its_cancellation_and_ends_cancelled(
    kind: str,
    request: pytest.FixtureRequest,
    sqs_endpoint: str,
    make_queue: MakeQueue,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A visibility timeout of 3 s: the heartbeat, and the tombstone reads, every 1 s.
    url = make_queue("cancel", visibility_timeout=3)
    app_env = {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps({"default": {"name": url.rsplit("/", 1)[-1]}}),
        **_store_env(kind, request, sqs_endpoint),
    }
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))},
        **FAKE_AWS_ENV,
        "PYTHONUNBUFFERED": "1",
        **app_env,
    }
    command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]
    for name, value in app_env.items():
        monkeypatch.setenv(name, value)
    from tests.integration.cancel_app import create_app

    web = create_app()
    jobs: t.Any = web.extensions["sqs_jobs"]
    with web.app_context():
        jobs.enqueue("default", "long", {}, job_id="report-7")
        # The queued record is written before the worker starts: moto_server's
        # DynamoDB does not serialise two conditional updates of one item.
        assert jobs.get_job("report-7").status == "queued"
    worker = WorkerProcess([*command, "--concurrency", "2"], env=env, cwd=ROOT)
    try:
        with web.app_context():
            worker.wait_for("long_running", timeout=30, job_id="report-7")
            wait_until(
                lambda: jobs.get_job("report-7").status == "running",
                15,
                worker.output,
            )

            assert jobs.cancel("report-7") is True

            finished = worker.wait_for("job_finished", timeout=30, job_id="report-7")
            assert finished["outcome"] == "cancelled"
            assert worker.find("long_cancelled", aborted=True)
            wait_until(
                lambda: jobs.get_job("report-7").status == "cancelled",
                15,
                worker.output,
            )
            assert jobs.get_job("report-7").started_at is not None  # it ran
            assert jobs.cancel("report-7") is False  # finished: nothing to cancel
        assert message_count(make_client(sqs_endpoint), url) == 0
    finally:
        worker.close()
