"""Idempotent handlers across real ``flask sqs-worker`` processes sharing a store."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.support import message_count

from .conftest import FAKE_AWS_ENV
from .conftest import make_client
from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import wait_until
from .processes import WorkerProcess

APP = "tests.integration.idempotent_app:create_app"


def test_duplicates_across_processes_run_once_and_never_at_the_same_time(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    store_url: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = make_queue("idem", visibility_timeout=4)
    store = SQLAlchemyStore(store_url)
    store.create_tables()
    store.close()
    app_env = {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps({"default": {"name": url.rsplit("/", 1)[-1]}}),
        "TEST_APP_STORE_URL": store_url,
        "TEST_APP_DIR": str(tmp_path),
    }
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))},
        **FAKE_AWS_ENV,
        "PYTHONUNBUFFERED": "1",
        **app_env,
    }
    command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]
    workers = [
        WorkerProcess([*command, "--concurrency", "2"], env=env, cwd=ROOT)
        for _ in range(2)
    ]
    try:
        for worker in workers:
            worker.wait_for("worker_started", timeout=30)
        for name, value in app_env.items():
            monkeypatch.setenv(name, value)
        from tests.integration.idempotent_app import create_app

        web = create_app()
        copies = 4
        with web.app_context():
            for _ in range(copies):
                web.extensions["sqs_jobs"].enqueue(
                    "default", "charge", {"amount": 5}, job_id="order-9"
                )

        def finished(outcome: str, **fields: object) -> int:
            return sum(
                len(w.find("job_finished", outcome=outcome, **fields)) for w in workers
            )

        def output() -> str:
            return "\n---\n".join(w.output() for w in workers)

        # The first copy holds the key until released: the others find it held.
        wait_until(
            lambda: finished("retry", idempotency="in_progress") >= 1, 30, output
        )
        (tmp_path / "release").touch()
        wait_until(
            lambda: finished("success") + finished("duplicate") == copies, 60, output
        )

        assert finished("success") == 1
        assert (tmp_path / "runs").read_text().splitlines()[0].startswith("order-9 ")
        assert len((tmp_path / "runs").read_text().splitlines()) == 1
        assert not (tmp_path / "overlap").exists()
        assert message_count(make_client(sqs_endpoint), url) == 0
    finally:
        for worker in workers:
            worker.close()
