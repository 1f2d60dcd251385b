"""A batch across ``flask sqs-worker`` processes, one SIGKILLed mid-batch."""

from __future__ import annotations

import os
import pathlib
import signal
import sys

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store.sql import outbox_table

from tests.support import message_count

from .conftest import make_client
from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import store_app_env
from .helpers import wait_until
from .processes import WorkerProcess

APP = "tests.integration.batch_app:create_app"
CHILDREN = 60


def _lines(path: pathlib.Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_callbacks_run_once_when_a_worker_is_killed_mid_batch(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    store_url: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A short visibility timeout: the killed worker's children come back soon.
    url = make_queue("batch", visibility_timeout=3)
    app_env, env = store_app_env(sqs_endpoint, url, store_url, tmp_path)
    command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]

    def start() -> WorkerProcess:
        worker = WorkerProcess([*command, "--concurrency", "2"], env=env, cwd=ROOT)
        workers.append(worker)
        return worker

    workers: list[WorkerProcess] = []
    try:
        victim, survivor = start(), start()
        for worker in workers:
            worker.wait_for("worker_started", timeout=30)
        for name, value in app_env.items():
            monkeypatch.setenv(name, value)
        from tests.integration.batch_app import child
        from tests.integration.batch_app import create_app
        from tests.integration.batch_app import jobs
        from tests.integration.batch_app import on_done

        web = create_app()
        with web.app_context():
            batch = jobs.batch(
                [child.s(n=n) for n in range(CHILDREN)],
                on_complete=on_done.s(label="complete"),
                on_success=on_done.s(label="success"),
                on_failure=on_done.s(label="failure"),
            ).enqueue()

        def output() -> str:
            return "\n---\n".join(w.output() for w in workers)

        runs, callbacks = tmp_path / "runs", tmp_path / "callbacks"

        # Kill the victim once it has run some children, while it runs others.
        def victim_busy() -> bool:
            ran = sum(line.endswith(f" {victim.pid}") for line in _lines(runs))
            started = len(victim.find("job_started"))
            return ran >= 5 and started > len(victim.find("job_finished"))

        wait_until(victim_busy, 60, output, interval=0.005)
        os.kill(victim.pid, signal.SIGKILL)
        start().wait_for("worker_started", timeout=30)
        wait_until(lambda: len(_lines(callbacks)) >= 2, 120, output)

        # Nothing is left to run or to send: the callbacks seen are all there are.
        wait_until(
            lambda: (
                message_count(make_client(sqs_endpoint), url) == 0
                and _outbox_rows(store_url) == 0
            ),
            60,
            output,
        )
        with web.app_context():
            record = jobs.get_batch(batch.batch_id)
        assert record is not None
        assert (record.status, record.succeeded, record.pending) == (
            "succeeded",
            CHILDREN,
            0,
        )
        assert record.callbacks_sent == ["on_complete", "on_success"]
        assert sorted(_lines(callbacks)) == [
            f"complete {batch.batch_id}",
            f"success {batch.batch_id}",
        ]
        ran = {int(line.split()[0]) for line in _lines(runs)}
        assert ran == set(range(CHILDREN))
        assert survivor.returncode is None
    finally:
        for worker in workers:
            worker.close()


def _outbox_rows(store_url: str) -> int:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as connection:
            count = sa.select(sa.func.count()).select_from(outbox_table)
            return int(connection.execute(count).scalar_one())
    finally:
        engine.dispose()
