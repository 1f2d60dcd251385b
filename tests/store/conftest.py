"""Fixtures of the store tests: DynamoDB through a real moto server."""

from __future__ import annotations

import collections.abc as cabc
import subprocess
import sys
import typing as t
import uuid

import boto3
import pytest
from botocore.config import Config

from tests.integration.servers import free_port
from tests.integration.servers import stop_process
from tests.integration.servers import wait_until_answers

REGION = "us-east-1"

# moto checks a write's condition and then writes, without a lock: on its
# threaded server two concurrent conditional puts can both succeed (2 races
# in 150 here), where DynamoDB serialises the writes to one item. Serving one
# request at a time gives that guarantee back, so the tests check our
# conditions rather than moto's thread safety.
_SERIAL_MOTO_SERVER = """
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app,
)
run_simple(
    "127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app),
    threaded=False, request_handler=MotoRequestHandler,
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
