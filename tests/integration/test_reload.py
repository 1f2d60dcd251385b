"""``flask sqs-worker --reload``: real worker processes, real file changes."""

from __future__ import annotations

import collections.abc as cabc
import http.client
import os
import pathlib
import signal
import subprocess
import sys
import typing as t

import pytest

from .conftest import FAKE_AWS_ENV
from .conftest import MakeQueue
from .helpers import producer
from .helpers import wait_until
from .processes import LogEvent
from .processes import WorkerProcess
from .servers import free_port

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: The app the tests run, written into a folder of its own: its handlers live in
#: ``handlers.py``, which the tests rewrite.
APP = '''"""A Flask app whose handlers live in ``handlers.py``.

Set up by environment variables: ``RELOAD_APP_ENDPOINT`` (the SQS endpoint)
and ``RELOAD_APP_QUEUE`` (the queue's name). Logs are JSON lines on stdout.
"""

from __future__ import annotations

import os
import sys

import structlog
from flask import Flask
from flask_sqs_jobs import SQSJobs

import handlers


def create_app() -> Flask:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
    )
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_ENDPOINT_URL=os.environ["RELOAD_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_QUEUES={"default": {"name": os.environ["RELOAD_APP_QUEUE"]}},
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
    )
    jobs = SQSJobs(app)
    handlers.register(jobs)
    return app
'''

HANDLERS = '''"""The handlers; the tests change ``VERSION``."""

from __future__ import annotations

import pathlib
import time
import typing as t

import structlog
from flask_sqs_jobs import SQSJobs

log = structlog.get_logger("reload_app")
VERSION = 1
#: How long ``block`` waits for its release file at most.
BLOCK_LIMIT_SECONDS = 60


def register(jobs: SQSJobs) -> None:
    @jobs.handler("version")
    def version(payload: dict[str, t.Any]) -> None:
        log.info("version_ran", version=VERSION)

    @jobs.handler("block")
    def block(payload: dict[str, t.Any]) -> None:
        """Log ``block_started``, then wait for the payload's ``release`` file."""
        log.info("block_started", version=VERSION)
        release = pathlib.Path(payload["release"])
        deadline = time.monotonic() + BLOCK_LIMIT_SECONDS
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        log.info("block_finished", version=VERSION)
'''


class StartReloading(t.Protocol):
    def __call__(self, *args: str) -> WorkerProcess: ...


@pytest.fixture
def app_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    (folder / "handlers.py").write_text(HANDLERS)
    return folder


@pytest.fixture
def queue_url(make_queue: MakeQueue) -> str:
    return make_queue("reload", visibility_timeout=30)


@pytest.fixture
def start_reloading(
    sqs_endpoint: str, queue_url: str, app_dir: pathlib.Path
) -> cabc.Iterator[StartReloading]:
    """Start ``flask sqs-worker --reload ARGS`` in the app's folder and wait
    until its first worker process polls. Each is stopped (or killed) and
    reaped afterwards, with its worker processes."""
    started: list[WorkerProcess] = []

    def start(*args: str) -> WorkerProcess:
        env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AWS_", "FLASK_"))
            },
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "RELOAD_APP_ENDPOINT": sqs_endpoint,
            "RELOAD_APP_QUEUE": queue_url.rsplit("/", 1)[-1],
        }
        command = [sys.executable, "-m", "flask", "--app", "app:create_app"]
        process = WorkerProcess(
            [*command, "sqs-worker", "--reload", *args],
            env=env,
            cwd=app_dir,
            new_session=True,
        )
        started.append(process)
        process.wait_for("worker_started", timeout=30)
        return process

    yield start
    for process in started:
        if process.returncode is None:
            # The whole group: the supervisor and its worker process.
            os.killpg(process.pid, signal.SIGKILL)
        process.close()


def healthz(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


def set_version(app_dir: pathlib.Path, version: int | str) -> None:
    """Rewrite ``handlers.py`` as an editor saving it would."""
    path = app_dir / "handlers.py"
    path.write_text(HANDLERS.replace("VERSION = 1", f"VERSION = {version}"))


def index_of(worker: WorkerProcess, event: LogEvent) -> int:
    return next(i for i, seen in enumerate(worker.events) if seen is event)


def test_a_changed_file_restarts_the_worker_gracefully_with_the_new_code(
    sqs_client: SQSClient,
    queue_url: str,
    app_dir: pathlib.Path,
    start_reloading: StartReloading,
    tmp_path: pathlib.Path,
) -> None:
    port = free_port()
    worker = start_reloading("--health-port", str(port))
    jobs = producer(sqs_client, default=queue_url)
    jobs.enqueue("default", "version", {})
    worker.wait_for("version_ran", version=1)
    release = tmp_path / "release"
    blocked = jobs.enqueue("default", "block", {"release": str(release)})
    worker.wait_for("block_started", version=1)

    set_version(app_dir, 2)
    changed = worker.wait_for("files_changed", timeout=30)
    draining = worker.wait_for("worker_stopping")
    release.touch()
    finished = worker.wait_for("job_finished", message_id=blocked)
    stopped = worker.wait_for("worker_stopped")
    worker.wait_for("worker_started", count=2, timeout=30)
    jobs.enqueue("default", "version", {})
    ran = worker.wait_for("version_ran", version=2)
    # The new worker process reports its health to the supervisor's port.
    wait_until(lambda: healthz(port) == 200, 30, lambda: f"/healthz 200 on port {port}")
    worker.send_signal(signal.SIGTERM)
    status = worker.wait(30)

    assert changed["files"] == ["handlers.py"]
    assert worker.find("stop_signal_received", signal="SIGTERM", action="graceful")
    assert draining["running"] == 1
    # The running job finished on the old code before the old worker stopped.
    assert finished["outcome"] == "success"
    assert worker.find("block_finished", version=1)
    assert index_of(worker, draining) < index_of(worker, finished)
    assert index_of(worker, finished) < index_of(worker, stopped)
    assert stopped["reason"] == "stop_requested"
    assert worker.find("worker_process_exited", action="reloading", exit_status=0)
    assert index_of(worker, ran) > index_of(worker, stopped)
    assert not worker.find("version_ran", version=1)[1:]
    assert status == 0
    assert worker.find("supervisor_stopped", exit_status=0)


def test_a_broken_file_waits_for_the_fix_then_runs_it(
    sqs_client: SQSClient,
    queue_url: str,
    app_dir: pathlib.Path,
    start_reloading: StartReloading,
) -> None:
    worker = start_reloading()

    set_version(app_dir, "(")  # a syntax error: the new worker cannot start
    worker.wait_for("worker_process_exited", action="waiting for a file change")
    set_version(app_dir, 3)
    worker.wait_for("files_changed", action="starting the worker", timeout=30)
    worker.wait_for("worker_started", count=2, timeout=30)
    producer(sqs_client, default=queue_url).enqueue("default", "version", {})
    worker.wait_for("version_ran", version=3)
    worker.send_signal(signal.SIGTERM)

    assert worker.wait(30) == 0
    assert "SyntaxError" in worker.output()


def test_reload_is_refused_with_more_than_one_process(app_dir: pathlib.Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flask",
            "--app",
            "app:create_app",
            "sqs-worker",
            "--reload",
            "--processes",
            "2",
        ],
        cwd=app_dir,
        env={
            **os.environ,
            **FAKE_AWS_ENV,
            "RELOAD_APP_ENDPOINT": "http://127.0.0.1:1",
            "RELOAD_APP_QUEUE": "jobs",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "Error: --reload runs one worker process, for development; it cannot be"
        " used with --processes 2"
    ]
