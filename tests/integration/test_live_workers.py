"""Live workers: a real ``flask sqs-worker`` registers itself in the store."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import pathlib
import signal
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store import WorkerRecord
from flask_sqs_jobs.store.sql._tables import workers as workers_table

from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env


@pytest.fixture
def store(tmp_path: pathlib.Path) -> cabc.Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    yield store
    store.close()


@pytest.fixture
def env(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    record_file: pathlib.Path,
    store: SQLAlchemyStore,
) -> dict[str, str]:
    url = make_queue("records-default", visibility_timeout=30)
    return {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps({"default": {"name": url.rsplit("/", 1)[-1]}}),
        "TEST_APP_RECORD_FILE": str(record_file),
        "TEST_APP_STORE_URL": str(store.engine.url),
    }


@pytest.fixture
def web_app(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Flask:
    from tests.integration.flask_test_app import create_app

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return create_app()


@pytest.fixture
def start(env: dict[str, str]) -> cabc.Iterator[cabc.Callable[[], WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        process = WorkerProcess(
            flask_command("sqs-worker", "--concurrency", "2"),
            env=subprocess_env(env),
            cwd=ROOT,
        )
        started.append(process)
        process.wait_for("worker_started", timeout=30)
        return process

    yield start
    for process in started:
        process.close()


def listed(store: SQLAlchemyStore, pid: int) -> WorkerRecord | None:
    return next((w for w in store.worker_registry().list() if w.pid == pid), None)


def start_registered(
    store: SQLAlchemyStore, start: cabc.Callable[[], WorkerProcess]
) -> WorkerProcess:
    """Start a worker and wait until its row is in the store."""
    worker = start()
    wait_until(
        lambda: listed(store, worker.pid) is not None,
        10,
        lambda: f"worker {worker.pid} never registered: {worker.output()}",
    )
    return worker


def workers_json(app: Flask) -> list[dict[str, t.Any]]:
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "workers", "--json"])
    assert result.exit_code == 0, result.output
    return t.cast(list[dict[str, t.Any]], json.loads(result.output)["workers"])


def test_a_worker_is_listed_while_it_runs_and_gone_after_sigterm(
    store: SQLAlchemyStore, start: cabc.Callable[[], WorkerProcess], web_app: Flask
) -> None:
    worker = start_registered(store, start)
    [shown] = workers_json(web_app)
    assert (shown["pid"], shown["queues"], shown["concurrency"]) == (
        worker.pid,
        ["default"],
        2,
    )
    assert shown["state"] == "live"
    assert shown["worker_id"].split(":")[1] == str(worker.pid)

    jobs: SQSJobs = web_app.extensions["sqs_jobs"]
    with web_app.app_context():
        jobs.enqueue("default", "record", {"n": 1}, job_id="through-a-worker")

        def succeeded() -> bool:
            record = jobs.get_job("through-a-worker")
            return record is not None and record.status == "succeeded"

        wait_until(succeeded, 20, lambda: f"{jobs.get_job('through-a-worker')}")

    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert listed(store, worker.pid) is None
    assert workers_json(web_app) == []


def test_a_killed_worker_is_shown_as_lost_once_its_row_is_stale(
    store: SQLAlchemyStore, start: cabc.Callable[[], WorkerProcess], web_app: Flask
) -> None:
    worker = start_registered(store, start)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert [w["state"] for w in workers_json(web_app)] == ["live"]
    old = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2)
    with store.engine.begin() as connection:
        connection.execute(sa.update(workers_table).values(last_seen_at=old))
    [shown] = workers_json(web_app)
    assert (shown["pid"], shown["state"]) == (worker.pid, "lost")
    table = web_app.test_cli_runner().invoke(args=["sqs-jobs", "workers"])
    assert "lost" in table.output
