from __future__ import annotations

import collections.abc as cabc
import typing as t

import boto3
import pytest
import structlog
import structlog.testing
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.model._middleware import reset_trace_injectors
from moto import mock_aws

from tests.log_capture import capture_logs
from tests.support import create_queue

if t.TYPE_CHECKING:
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials, so no test can reach a real AWS account."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture(autouse=True)
def _clear_log_context() -> cabc.Iterator[None]:
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()


@pytest.fixture(autouse=True)
def _forget_trace_injectors() -> cabc.Iterator[None]:
    """Each test starts as a fresh process would: no tracing middleware in use."""
    reset_trace_injectors()
    yield
    reset_trace_injectors()


@pytest.fixture(scope="session")
def _reusable_client() -> SQSClient:
    """One boto3 client for the whole session: making one costs ~50 ms."""
    with mock_aws():
        return boto3.client(
            "sqs",
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture
def sqs(_reusable_client: SQSClient) -> cabc.Iterator[SQSClient]:
    """A boto3 SQS client talking to a fresh moto in-process mock."""
    with mock_aws():
        yield _reusable_client


# -- the Flask layer -----------------------------------------------------------


@pytest.fixture
def queue_urls(sqs: SQSClient) -> dict[str, str]:
    """The SQS queues behind the test app's ``default`` and ``critical`` queues."""
    return {
        "default": create_queue(sqs, "app-default", visibility_timeout=30),
        "critical": create_queue(sqs, "app-critical", visibility_timeout=30),
    }


@pytest.fixture
def app_config(queue_urls: dict[str, str]) -> dict[str, t.Any]:
    """The test app's ``SQS_JOBS_*`` settings; override this fixture to change them."""
    return {
        "SQS_JOBS_QUEUES": {
            "default": {"name": "app-default"},
            "critical": {"name": "app-critical", "weight": 3},
        },
        "SQS_JOBS_IDLE_WAIT_SECONDS": 0,
    }


@pytest.fixture
def jobs() -> SQSJobs:
    """A fresh extension: each test registers its own handlers."""
    return SQSJobs()


class MakeApp(t.Protocol):
    def __call__(
        self,
        config: cabc.Mapping[str, t.Any] | None = None,
        *,
        extension: SQSJobs | None = None,
    ) -> Flask: ...


@pytest.fixture
def make_app(sqs: SQSClient, app_config: dict[str, t.Any], jobs: SQSJobs) -> MakeApp:
    """Build a test app from ``config`` (default ``app_config``) bound to ``jobs``.

    Depends on ``sqs``, so moto's mock is active before any boto3 client exists.
    """

    def make(
        config: cabc.Mapping[str, t.Any] | None = None,
        *,
        extension: SQSJobs | None = None,
    ) -> Flask:
        app = Flask(__name__)
        app.config["TESTING"] = True
        app.config.update(app_config if config is None else config)
        (jobs if extension is None else extension).init_app(app)
        return app

    return make


@pytest.fixture
def bare_app(make_app: MakeApp) -> Flask:
    """The test app, without the request context pytest-flask pushes for ``app``.

    For code that must run outside any request: CLI commands, the shell.
    """
    return make_app()


@pytest.fixture
def app(bare_app: Flask) -> Flask:
    """The test app. pytest-flask pushes a request context for each test using it."""
    return bare_app


@pytest.fixture
def runner(bare_app: Flask) -> FlaskCliRunner:
    return bare_app.test_cli_runner()


@pytest.fixture
def log_events() -> cabc.Iterator[list[EventDict]]:
    """Captured structlog events, with the bound context merged in."""
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        yield events


# -- job stores ------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> cabc.Iterator[str]:
    """A PostgreSQL cluster for this test process (skips when none is installed)."""
    from tests.postgres import postgres_cluster

    with postgres_cluster() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """The URL of an empty PostgreSQL database of its own, for one test."""
    from tests.postgres import fresh_database

    return fresh_database(postgres_server)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: t.Any) -> str:
    """A fresh store database: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    return t.cast(str, request.getfixturevalue("postgres_url"))


@pytest.fixture
def sql_store(store_url: str) -> cabc.Iterator[t.Any]:
    """A SQLAlchemyStore with its tables on :func:`store_url`, closed after."""
    from flask_sqs_jobs.store import SQLAlchemyStore

    store = SQLAlchemyStore(store_url)
    store.create_tables()
    yield store
    store.close()
