"""Helpers of the integration tests: producing jobs, reading what the worker ran."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import pathlib
import time
import typing as t

from flask_sqs_jobs.engine import QueueGroup

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Record: t.TypeAlias = dict[str, t.Any]


def producer(client: SQSClient, **urls: str) -> QueueGroup:
    """A :class:`QueueGroup` for enqueueing: logical name -> queue URL."""
    return QueueGroup.build(
        boto_client=client, queues={name: {"url": url} for name, url in urls.items()}
    )


def read_records(path: pathlib.Path) -> list[Record]:
    """The jobs the worker's handlers ran, in the order they finished."""
    if not path.exists():
        return []
    # A line being written right now may be incomplete: only lines that end
    # with a newline count (the last piece of the split is never one).
    lines = path.read_text().split("\n")[:-1]
    return [json.loads(line) for line in lines]


def wait_for_records(
    path: pathlib.Path, count: int, timeout: float = 15.0
) -> list[Record]:
    """Poll the record file until it holds at least ``count`` jobs; return them."""
    wait_until(
        lambda: len(read_records(path)) >= count,
        timeout,
        lambda: f"{count} recorded jobs; got {read_records(path)}",
    )
    return read_records(path)


def wait_until(
    predicate: cabc.Callable[[], bool],
    timeout: float,
    describe: cabc.Callable[[], str],
    interval: float = 0.05,
) -> None:
    """Poll ``predicate`` until it is true.

    :raises AssertionError: still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {describe()}"
            )
        time.sleep(interval)


def log_time(event: cabc.Mapping[str, t.Any]) -> float:
    """The POSIX time of a JSON log event (structlog's ISO ``timestamp``)."""
    stamp = dt.datetime.fromisoformat(str(event["timestamp"]))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


def store_app_env(
    sqs_endpoint: str, queue_url: str, store_url: str, shared: pathlib.Path
) -> tuple[dict[str, str], dict[str, str]]:
    """The ``TEST_APP_*`` settings of an app on one queue and a store (its tables
    made), and the environment of a worker process running it."""
    import os

    from flask_sqs_jobs.store import SQLAlchemyStore

    from .conftest import FAKE_AWS_ENV

    store = SQLAlchemyStore(store_url)
    store.create_tables()
    store.close()
    app_env = {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps({"default": {"name": queue_url.rsplit("/")[-1]}}),
        "TEST_APP_STORE_URL": store_url,
        "TEST_APP_DIR": str(shared),
    }
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))
    }
    env = {**inherited, **FAKE_AWS_ENV, "PYTHONUNBUFFERED": "1", **app_env}
    return app_env, env


def store_app(name: str, **config: object) -> t.Any:
    """A Flask app configured from the ``TEST_APP_*`` settings, with ``config``."""
    import os

    from flask import Flask

    from tests.integration.flask_test_app import configure_logging

    configure_logging()
    app = Flask(name)
    settings = {
        "QUEUES": os.environ["TEST_APP_QUEUES"],
        "ENDPOINT_URL": os.environ["TEST_APP_ENDPOINT"],
        "REGION_NAME": "us-east-1",
        "IDLE_WAIT_SECONDS": 1,
        "STORE_URL": os.environ["TEST_APP_STORE_URL"],
    }
    app.config.update({f"SQS_JOBS_{k}": v for k, v in {**settings, **config}.items()})
    return app
