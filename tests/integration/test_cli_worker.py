"""``flask sqs-worker`` as a real process: signals, app contexts, request ids."""

from __future__ import annotations

import collections
import collections.abc as cabc
import json
import os
import pathlib
import signal
import subprocess
import sys
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.support import message_count

from .conftest import FAKE_AWS_ENV
from .conftest import make_client
from .conftest import MakeQueue
from .conftest import ROOT
from .conftest import unique_name
from .helpers import read_records
from .helpers import wait_until
from .processes import WorkerProcess
from .servers import free_port

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from werkzeug.test import TestResponse

APP = "tests.integration.flask_test_app:create_app"


def flask_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", APP, *args]


def subprocess_env(app_env: cabc.Mapping[str, str]) -> dict[str, str]:
    """The environment of a ``flask`` subprocess: fake AWS credentials, JSON logs."""
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))
    }
    return {
        **inherited,
        **FAKE_AWS_ENV,
        "PYTHONUNBUFFERED": "1",
        "TEST_APP_JSON_LOGS": "1",
        **app_env,
    }


@pytest.fixture
def server_queues(make_queue: MakeQueue) -> dict[str, str]:
    return {
        "default": make_queue("flask-default", visibility_timeout=30),
        "critical": make_queue("flask-critical", visibility_timeout=30),
    }


@pytest.fixture
def app_env(
    sqs_endpoint: str, server_queues: dict[str, str], record_file: pathlib.Path
) -> dict[str, str]:
    """The test app's settings (see ``flask_test_app``); queues given by name."""
    queues = {
        logical: {"name": url.rsplit("/", 1)[-1]}
        for logical, url in server_queues.items()
    }
    return {
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUES": json.dumps(queues),
        "TEST_APP_RECORD_FILE": str(record_file),
    }


@pytest.fixture
def web_app(monkeypatch: pytest.MonkeyPatch, app_env: dict[str, str]) -> Flask:
    """The same app, in this process: it enqueues as a web app would."""
    from tests.integration.flask_test_app import create_app

    for name, value in app_env.items():
        monkeypatch.setenv(name, value)
    return create_app()


def enqueue(app: Flask, queue: str, job_type: str, payload: dict[str, t.Any]) -> str:
    """Enqueue from a shell-like app context (no request)."""
    jobs: SQSJobs = app.extensions["sqs_jobs"]
    with app.app_context():
        return jobs.enqueue(queue, job_type, payload)


class StartFlaskWorker(t.Protocol):
    def __call__(self, *args: str) -> WorkerProcess: ...


@pytest.fixture
def start_flask_worker(app_env: dict[str, str]) -> cabc.Iterator[StartFlaskWorker]:
    """Start ``flask sqs-worker`` for the test app; wait until it polls.

    Every process is killed (if still running) and reaped afterwards.
    """
    started: list[WorkerProcess] = []

    def start(*args: str) -> WorkerProcess:
        process = WorkerProcess(
            flask_command("sqs-worker", *args), env=subprocess_env(app_env), cwd=ROOT
        )
        started.append(process)
        process.wait_for("worker_started", timeout=30)
        return process

    yield start
    for process in started:
        process.close()


def signal_arguments(worker: WorkerProcess, name: str) -> list[dict[str, t.Any]]:
    """The arguments of each ``name`` signal the worker's app received."""
    events = worker.find("signal_received", signal=name)
    assert all(event["sender_is_app"] for event in events), events
    return [event["arguments"] for event in events]


def message_id_of(response: TestResponse) -> str:
    body = response.get_json()
    assert response.status_code == 200, body
    return str(body["message_id"])


def test_a_job_carries_the_request_id_of_the_web_request_into_the_workers_logs(
    web_app: Flask, start_flask_worker: StartFlaskWorker, record_file: pathlib.Path
) -> None:
    worker = start_flask_worker()
    client = web_app.test_client()

    with_header = client.post(
        "/enqueue/default/record", json={"n": 1}, headers={"X-Request-ID": "web-1"}
    )
    without_header = client.post("/enqueue/critical/record", json={"n": 2})
    first_id = message_id_of(with_header)
    first = worker.wait_for("job_finished", message_id=first_id)
    second = worker.wait_for("job_finished", message_id=message_id_of(without_header))

    generated = without_header.headers["X-Request-ID"]
    assert (first["outcome"], first["request_id"]) == ("success", "web-1")
    assert (second["outcome"], second["request_id"]) == ("success", generated)
    started = worker.find("job_started", message_id=first_id)
    assert [event["request_id"] for event in started] == ["web-1"]
    # A handler's own log lines carry the request id too.
    recorded = worker.find("job_recorded", payload={"n": 1})
    assert [event["request_id"] for event in recorded] == ["web-1"]
    jobs = [r for r in read_records(record_file) if r["kind"] == "job"]
    assert sorted(r["request_id"] for r in jobs) == sorted(["web-1", generated])
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_each_job_runs_in_its_own_app_context_and_sends_the_signals(
    web_app: Flask, start_flask_worker: StartFlaskWorker, record_file: pathlib.Path
) -> None:
    worker = start_flask_worker()
    ids = {
        enqueue(web_app, "default", "record", {"n": 1}): "success",
        enqueue(web_app, "critical", "record", {"n": 2}): "success",
        enqueue(web_app, "default", "fail", {"n": 3}): "retry",
    }
    for message_id in ids:
        worker.wait_for("job_finished", message_id=message_id)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0

    records = read_records(record_file)
    jobs = [r for r in records if r["kind"] == "job"]
    assert sorted(r["message_id"] for r in jobs) == sorted(ids)
    assert [r["g_before"] for r in jobs] == [None] * 3, "a job saw another's g"
    teardowns = [r for r in records if r["kind"] == "teardown" and r["message_id"]]
    assert collections.Counter(r["message_id"] for r in teardowns) == dict.fromkeys(
        ids, 1
    )
    assert {r["message_id"]: r["exception"] for r in teardowns} == {
        message_id: "RuntimeError" if outcome == "retry" else None
        for message_id, outcome in ids.items()
    }

    assert signal_arguments(worker, "worker-started") == [
        {"queues": ["default", "critical"]}
    ]
    started = signal_arguments(worker, "job-started")
    assert sorted(a["message_id"] for a in started) == sorted(ids)
    assert all(
        a["receive_count"] == 1 and a["job"]["message_id"] == a["message_id"]
        for a in started
    )
    finished = {a["message_id"]: a for a in signal_arguments(worker, "job-finished")}
    assert {m: a["outcome"] for m, a in finished.items()} == ids
    assert {m: a["exception"] for m, a in finished.items()} == {
        message_id: "RuntimeError" if outcome == "retry" else None
        for message_id, outcome in ids.items()
    }
    assert signal_arguments(worker, "worker-stopped") == [{"reason": "stop_requested"}]


def test_sigterm_during_a_job_lets_it_finish_then_the_worker_exits_0(
    web_app: Flask,
    start_flask_worker: StartFlaskWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
    sqs_client: SQSClient,
    server_queues: dict[str, str],
) -> None:
    release = tmp_path / "release"
    worker = start_flask_worker()
    message_id = enqueue(web_app, "default", "block", {"release": str(release)})
    worker.wait_for("block_started")

    worker.send_signal(signal.SIGTERM)
    worker.wait_for("worker_stopping")
    assert worker.returncode is None, "the worker did not wait for its running job"
    release.touch()

    assert worker.wait() == 0
    assert worker.find("job_finished", message_id=message_id, outcome="success")
    assert signal_arguments(worker, "worker-stopped") == [{"reason": "stop_requested"}]
    teardowns = [
        r
        for r in read_records(record_file)
        if r["kind"] == "teardown" and r["message_id"] == message_id
    ]
    assert teardowns == [
        {"kind": "teardown", "message_id": message_id, "exception": None}
    ]
    assert message_count(sqs_client, server_queues["default"]) == 0


def test_only_the_queues_given_with_queue_are_polled(
    web_app: Flask, start_flask_worker: StartFlaskWorker
) -> None:
    skipped = enqueue(web_app, "default", "record", {"n": 1})
    polled = enqueue(web_app, "critical", "record", {"n": 2})
    worker = start_flask_worker("--queue", "critical")

    worker.wait_for("job_finished", message_id=polled)
    worker.send_signal(signal.SIGTERM)

    assert worker.wait() == 0
    assert signal_arguments(worker, "worker-started") == [{"queues": ["critical"]}]
    assert worker.find("job_finished", message_id=skipped) == []


def run_flask(
    app_env: cabc.Mapping[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        flask_command(*args),
        env=subprocess_env(app_env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unknown_queue_exits_2_with_a_one_line_error(
    app_env: dict[str, str],
) -> None:
    result = run_flask(app_env, "sqs-worker", "--queue", "nope")

    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "Error: unknown queue 'nope'; configured queues (SQS_JOBS_QUEUES):"
        " 'default', 'critical'"
    ]


def test_a_queue_the_server_does_not_have_exits_2_naming_it(
    app_env: dict[str, str],
) -> None:
    missing = unique_name("missing")
    env = {**app_env, "TEST_APP_QUEUES": json.dumps({"default": {"name": missing}})}

    result = run_flask(env, "sqs-worker")

    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"Error: queue 'default': SQS has no queue named '{missing}'"
    )


def test_local_server_serves_sqs_with_the_configured_queues_until_sigterm(
    app_env: dict[str, str],
) -> None:
    names = [unique_name("local"), unique_name("local")]
    queues = {"default": {"name": names[0]}, "critical": {"name": names[1]}}
    env = {**app_env, "TEST_APP_QUEUES": json.dumps(queues)}
    port = free_port()
    server = WorkerProcess(
        flask_command("sqs-jobs", "local-server", "--port", str(port)),
        env=subprocess_env(env),
        cwd=ROOT,
    )
    try:
        wait_until(
            lambda: (
                f"critical: {names[1]} created" in server.output()
                or server.returncode is not None
            ),
            30,
            server.output,
        )
        endpoint = f"http://127.0.0.1:{port}"
        assert f"Local SQS server on {endpoint}" in server.output()
        client = make_client(endpoint)
        listed = client.list_queues()["QueueUrls"]
        assert sorted(url.rsplit("/", 1)[-1] for url in listed) == sorted(
            [*names, f"{names[0]}-dlq", f"{names[1]}-dlq"]
        )

        server.send_signal(signal.SIGTERM)

        assert server.wait() == 0
        assert server.output().splitlines()[-1] == "Local SQS server stopped"
    finally:
        server.close()
