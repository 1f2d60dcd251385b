"""Fixtures of the integration tier: a real SQS-compatible server, real processes.

Every test here talks HTTP to ``moto_server`` (started once per test process,
so once per xdist worker) or to the server named by ``SQS_TEST_ENDPOINT``.
Queues get unique names, so tests never share state and no server reset is
needed.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import json
import os
import pathlib
import sys
import typing as t
import uuid

import pytest

from tests.support import create_queue
from tests.support import local_sqs_client

from .processes import WorkerProcess
from .servers import sqs_server

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
ENGINE_WORKER = HERE / "engine_worker.py"
REGION = "us-east-1"
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def sqs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> cabc.Iterator[str]:
    """The endpoint URL of the SQS-compatible server under test."""
    log_path = tmp_path_factory.mktemp("sqs-server") / "server.log"
    with sqs_server(log_path) as endpoint:
        yield endpoint


def make_client(endpoint: str) -> SQSClient:
    """A boto3 SQS client for ``endpoint`` that fails fast instead of retrying."""
    return local_sqs_client(endpoint, attempts=2)


@pytest.fixture
def sqs_client(sqs_endpoint: str) -> SQSClient:
    return make_client(sqs_endpoint)


def unique_name(prefix: str) -> str:
    """A queue name no other test uses."""
    return f"it-{prefix}-{uuid.uuid4().hex[:12]}"


class MakeQueue(t.Protocol):
    def __call__(
        self,
        prefix: str = "jobs",
        *,
        fifo: bool = False,
        visibility_timeout: int | None = None,
        dead_letter_url: str | None = None,
        max_receive_count: int = 3,
        name: str | None = None,
    ) -> str: ...


@pytest.fixture
def make_queue(sqs_client: SQSClient) -> cabc.Iterator[MakeQueue]:
    """Create uniquely named queues (returning their URLs); delete them afterwards.

    ``name`` gives the exact name instead (make it unique: see :func:`unique_name`).
    """
    created: list[str] = []

    def make(
        prefix: str = "jobs",
        *,
        fifo: bool = False,
        visibility_timeout: int | None = None,
        dead_letter_url: str | None = None,
        max_receive_count: int = 3,
        name: str | None = None,
    ) -> str:
        if name is None:
            name = unique_name(prefix) + (".fifo" if fifo else "")
        url = create_queue(
            sqs_client,
            name,
            fifo=fifo,
            visibility_timeout=visibility_timeout,
            dead_letter_url=dead_letter_url,
            max_receive_count=max_receive_count,
        )
        created.append(url)
        return url

    yield make
    for url in reversed(created):
        with contextlib.suppress(Exception):
            sqs_client.delete_queue(QueueUrl=url)


@pytest.fixture
def record_file(tmp_path: pathlib.Path) -> pathlib.Path:
    """Where the worker's handlers record the jobs they ran (JSON lines)."""
    return tmp_path / "records.jsonl"


class StartWorker(t.Protocol):
    def __call__(
        self,
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any]],
        *,
        concurrency: int = 1,
        idle_wait: int = 1,
        endpoint: str | None = None,
        max_receive_backoff: float | None = None,
        wait_until_started: bool = True,
    ) -> WorkerProcess: ...


@pytest.fixture
def start_worker(
    sqs_endpoint: str, record_file: pathlib.Path
) -> cabc.Iterator[StartWorker]:
    """Start ``engine_worker.py`` in a subprocess; it is always reaped afterwards.

    ``queues`` is what :meth:`QueueGroup.build` takes. By default this waits
    for the ``worker_started`` log line.
    """
    started: list[WorkerProcess] = []

    def start(
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any]],
        *,
        concurrency: int = 1,
        idle_wait: int = 1,
        endpoint: str | None = None,
        max_receive_backoff: float | None = None,
        wait_until_started: bool = True,
    ) -> WorkerProcess:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "SQS_ENDPOINT": endpoint or sqs_endpoint,
            "WORKER_QUEUES": json.dumps(queues),
            "WORKER_RECORD_FILE": str(record_file),
            "WORKER_IDLE_WAIT": str(idle_wait),
            "WORKER_CONCURRENCY": str(concurrency),
        }
        if max_receive_backoff is not None:
            env["WORKER_MAX_RECEIVE_BACKOFF"] = str(max_receive_backoff)
        process = WorkerProcess(
            [sys.executable, "-u", str(ENGINE_WORKER)], env=env, cwd=ROOT
        )
        started.append(process)
        if wait_until_started:
            process.wait_for("worker_started", timeout=30)
        return process

    yield start
    for process in started:
        process.close()
