"""The outbox across real processes: crashes, concurrent relays, the worker."""

from __future__ import annotations

import collections
import http.client
import json
import pathlib
import signal
import sys
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _write as _outbox
from prometheus_client.parser import text_string_to_metric_families

from . import test_cli_worker
from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import read_records
from .helpers import wait_until
from .processes import WorkerProcess
from .servers import free_port
from .test_cli_worker import flask_command
from .test_cli_worker import run_flask
from .test_cli_worker import StartFlaskWorker
from .test_cli_worker import subprocess_env

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def queue_url(make_queue: MakeQueue) -> str:
    return make_queue("outbox", visibility_timeout=60)


@pytest.fixture
def outbox_env(
    sqs_endpoint: str, queue_url: str, record_file: pathlib.Path, store_url: str
) -> dict[str, str]:
    """``flask_test_app``'s settings, with a store whose tables exist."""
    store = SQLAlchemyStore(store_url)
    store.create_tables()
    store.close()
    queues = {"default": {"name": queue_url.rsplit("/", 1)[-1]}}
    return {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps(queues),
        "TEST_APP_RECORD_FILE": str(record_file),
        "TEST_APP_STORE_URL": store_url,
    }


@pytest.fixture
def web_app(monkeypatch: pytest.MonkeyPatch, outbox_env: dict[str, str]) -> Flask:
    """The test app in this process, whose immediate sends never happen."""
    from tests.integration.flask_test_app import create_app

    for name, value in outbox_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_outbox, "sender_for", lambda engine, group: _Dropped())
    return create_app()


class _Dropped:
    def submit(self, rows: list[t.Any]) -> None:
        pass  # as if the process died right after its commit


def write_jobs(
    app: Flask, store_url: str, count: int, per_commit: int = 50
) -> list[str]:
    """Commit ``count`` outbox jobs (``record`` handler); return their job ids."""
    jobs = app.extensions["sqs_jobs"]
    engine = sa.create_engine(store_url)
    ids: list[str] = []
    with app.app_context(), sa.orm.Session(engine) as session:
        for start in range(0, count, per_commit):
            specs = [
                ("record", {"n": n})
                for n in range(start, min(count, start + per_commit))
            ]
            ids += jobs.enqueue_many("default", specs, session=session)
            session.commit()
    engine.dispose()
    return ids


def drain_queue(sqs: SQSClient, url: str) -> list[str]:
    """The job ids of every message on the queue, each deleted once received.

    Deleted, so a message received early cannot come back when its visibility
    timeout ends on a slow machine and count as a second send.
    """
    job_ids: list[str] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            return job_ids
        job_ids += [json.loads(m["Body"])["job_id"] for m in messages]
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages)
            ],
        )


def test_a_web_process_killed_between_commit_and_send_loses_nothing(
    outbox_env: dict[str, str], sqs_client: SQSClient, queue_url: str
) -> None:
    web = WorkerProcess(
        [sys.executable, "-m", "tests.integration.outbox_web"],
        env={**subprocess_env(outbox_env), "OUTBOX_WEB_COUNT": "3"},
        cwd=ROOT,
    )
    try:
        wait_until(
            lambda: any(line.startswith("committed ") for line in web.lines),
            30,
            lambda: f"the commit; output: {web.output()}",
        )
        web.send_signal(signal.SIGKILL)
        assert web.wait() == -signal.SIGKILL
    finally:
        web.close()
    line = next(line for line in web.lines if line.startswith("committed "))
    committed = json.loads(line.removeprefix("committed "))
    assert drain_queue(sqs_client, queue_url) == []

    relay = run_flask(outbox_env, "sqs-jobs", "outbox", "relay", "--once")
    assert relay.returncode == 0, relay.stdout + relay.stderr
    assert "sent 3 job(s)" in relay.stdout
    assert sorted(drain_queue(sqs_client, queue_url)) == sorted(committed)
    again = run_flask(outbox_env, "sqs-jobs", "outbox", "relay", "--once")
    assert "sent 0 job(s)" in again.stdout
    assert drain_queue(sqs_client, queue_url) == []


def test_two_relays_send_each_row_exactly_once(
    outbox_env: dict[str, str],
    web_app: Flask,
    sqs_client: SQSClient,
    queue_url: str,
) -> None:
    """PostgreSQL relays skip each other's locked rows; SQLite's take turns."""
    relays = [
        WorkerProcess(
            flask_command("sqs-jobs", "outbox", "relay"),
            env=subprocess_env(outbox_env),
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    try:
        for relay in relays:
            relay.wait_for("outbox_relay_started", timeout=30)
        written = write_jobs(web_app, outbox_env["TEST_APP_STORE_URL"], 400)
        sent: list[str] = []

        def all_sent() -> bool:
            sent.extend(drain_queue(sqs_client, queue_url))
            return len(set(sent)) >= len(written)

        wait_until(all_sent, 60, lambda: f"400 jobs; got {len(set(sent))}")
        for relay in relays:
            relay.send_signal(signal.SIGTERM)
        assert [relay.wait() for relay in relays] == [0, 0]
    finally:
        for relay in relays:
            relay.close()
    sent += drain_queue(sqs_client, queue_url)
    counts = collections.Counter(sent)
    assert set(counts) == set(written)
    assert max(counts.values()) == 1
    assert all(relay.find("outbox_send_failed") == [] for relay in relays)


def metrics(port: int) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        body = connection.getresponse().read().decode()
    finally:
        connection.close()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


#: ``flask sqs-worker`` as a real process, with ``app_env`` below.
start_flask_worker = test_cli_worker.start_flask_worker


@pytest.fixture
def app_env(outbox_env: dict[str, str]) -> dict[str, str]:
    """What ``start_flask_worker`` starts the worker with."""
    return outbox_env


def test_the_worker_relays_the_outbox_and_reports_it_on_metrics(
    web_app: Flask,
    outbox_env: dict[str, str],
    start_flask_worker: StartFlaskWorker,
    record_file: pathlib.Path,
) -> None:
    written = write_jobs(web_app, outbox_env["TEST_APP_STORE_URL"], 3)
    port = free_port()
    worker = start_flask_worker("--health-port", str(port))
    assert worker.find("outbox_relay_started")

    def ran() -> list[str]:
        return [r["job_id"] for r in read_records(record_file) if r["kind"] == "job"]

    wait_until(lambda: len(ran()) >= 3, 30, lambda: f"3 jobs run; got {ran()}")
    assert sorted(ran()) == sorted(written)
    wait_until(
        lambda: metrics(port).get("sqs_jobs_outbox_pending") == 0,
        10,
        lambda: f"an empty outbox on /metrics: {metrics(port)}",
    )
    assert metrics(port)["sqs_jobs_outbox_oldest_age_seconds"] == 0
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_no_outbox_relay_leaves_the_rows_pending(
    web_app: Flask,
    outbox_env: dict[str, str],
    start_flask_worker: StartFlaskWorker,
) -> None:
    write_jobs(web_app, outbox_env["TEST_APP_STORE_URL"], 2)
    port = free_port()
    worker = start_flask_worker("--no-outbox-relay", "--health-port", str(port))
    assert worker.find("outbox_relay_started") == []
    samples = metrics(port)
    assert samples["sqs_jobs_outbox_pending"] == 2
    assert samples["sqs_jobs_outbox_oldest_age_seconds"] >= 0
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
    status = run_flask(outbox_env, "sqs-jobs", "outbox", "status", "--json")
    assert json.loads(status.stdout)["pending"] == 2
