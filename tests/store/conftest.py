"""Fixtures of the store tests: DynamoDB through a real moto server; outbox apps."""

from __future__ import annotations

import collections.abc as cabc
import subprocess
import sys
import typing as t
import uuid

import boto3
import pytest
from botocore.config import Config
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
from flask_sqs_jobs.store.outbox import _write as _outbox
from flask_sqs_jobs.store.outbox._immediate import flush_all

from tests.integration.servers import free_port
from tests.integration.servers import stop_process
from tests.integration.servers import wait_until_answers
from tests.store.outbox_apps import App
from tests.store.outbox_apps import Dropped
from tests.store.outbox_apps import World
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

REGION = "us-east-1"

# moto checks a write's condition and then writes, without a lock: on its
# threaded server two concurrent conditional puts can both succeed (2 races
# in 150 here), where DynamoDB serialises the writes to one item. Serving one
# request at a time gives that guarantee back, so the tests check our
# conditions rather than moto's thread safety.
_SERIAL_MOTO_SERVER = """
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import create_backend_app
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
try:  # newer moto releases have their own handler; older ones use werkzeug's
    from moto.moto_server.werkzeug_app import MotoRequestHandler as handler
except ImportError:
    handler = None
run_simple(
    "127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app),
    threaded=False, request_handler=handler,
)
"""


@pytest.fixture(scope="session")
def dynamodb_endpoint(tmp_path_factory: pytest.TempPathFactory) -> cabc.Iterator[str]:
    """moto's server (DynamoDB) for this test process, one request at a time."""
    log_path = tmp_path_factory.mktemp("dynamodb-server") / "server.log"
    port = free_port()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERIAL_MOTO_SERVER, str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(f"{endpoint}/moto-api/", process, 30.0)
        yield endpoint
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def dynamodb_client(dynamodb_endpoint: str) -> t.Any:
    """A boto3 DynamoDB client on that server (thread-safe, shared)."""
    return boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            retries={"total_max_attempts": 3, "mode": "standard"},
            max_pool_connections=16,
        ),
    )


@pytest.fixture
def table_name() -> str:
    """A table name no other test uses (tables are never shared)."""
    return f"sqs-jobs-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def world(sqs: SQSClient, store_url: str, monkeypatch: pytest.MonkeyPatch) -> World:
    """Two queues, a standard and a FIFO one; rows are the relay's at once.

    No send after commit (as if each web process died after its commit), and
    no grace period: what the relay sends is all that is sent.
    """
    monkeypatch.setattr(_outbox_rows, "GRACE_SECONDS", 0.0)
    monkeypatch.setattr(_outbox, "sender_for", lambda engine, group: Dropped())
    default_url = create_queue(sqs, "park-default")
    orders_url = create_queue(sqs, "park-orders.fifo", fifo=True)
    return World(sqs, store_url, default_url, orders_url)


@pytest.fixture
def make_app(world: World) -> cabc.Iterator[t.Callable[..., App]]:
    """A process of the app (each call a new one, as after a restart)."""
    made: list[App] = []

    def make(**config: t.Any) -> App:
        app = Flask(__name__)
        app.config.update(
            SQS_JOBS_QUEUES={
                "default": {"name": "park-default"},
                "orders": {"name": "park-orders.fifo"},
            },
            SQS_JOBS_STORE_URL=world.store_url,
            SQS_JOBS_RECORD_JOBS=False,
            **config,
        )
        jobs = SQSJobs(app, boto_client=world.sqs)
        store = t.cast(SQLAlchemyStore, jobs.store(app))
        store.create_tables()
        made.append(App(app, jobs, store))
        return made[-1]

    yield make
    flush_all()
    for each in made:
        each.store.close()
