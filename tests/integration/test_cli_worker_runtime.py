"""A job's own ``max_runtime_seconds=`` under a real ``flask sqs-worker``."""

from __future__ import annotations

import pathlib
import signal
import typing as t

from tests.support import message_count

from . import test_cli_worker
from .test_cli_worker import StartFlaskWorker

if t.TYPE_CHECKING:
    from flask import Flask
    from flask_sqs_jobs import SQSJobs
    from mypy_boto3_sqs.client import SQSClient

server_queues = test_cli_worker.server_queues
app_env = test_cli_worker.app_env
web_app = test_cli_worker.web_app
start_flask_worker = test_cli_worker.start_flask_worker


def test_a_job_is_stopped_at_its_own_limit_below_its_handlers(
    web_app: Flask,
    start_flask_worker: StartFlaskWorker,
    sqs_client: SQSClient,
    server_queues: dict[str, str],
    tmp_path: pathlib.Path,
) -> None:
    worker = start_flask_worker()
    jobs: SQSJobs = web_app.extensions["sqs_jobs"]
    release = tmp_path / "never-created"
    with web_app.app_context():
        message_id = jobs.enqueue(
            "default",
            "patient_abortable",
            {"release": str(release)},
            max_runtime_seconds=1,
        )

    worker.wait_for("abortable_started", message_id=message_id)
    exceeded = worker.wait_for("max_runtime_exceeded", message_id=message_id)
    worker.wait_for("abort_requested_seen", message_id=message_id)
    finished = worker.wait_for("job_finished", message_id=message_id)

    assert exceeded["message_id"] == message_id
    assert finished["outcome"] == "heartbeat_failed"
    # Left for redelivery, not deleted.
    assert message_count(sqs_client, server_queues["default"]) == 1
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
