"""The operators' signals from a real ``flask sqs-worker``: ``job_received``,
``worker_error`` and ``job_finished``'s ``result`` and ``will_retry``."""

from __future__ import annotations

import signal
import typing as t

from flask import Flask

from . import test_cli_worker
from .test_cli_worker import enqueue
from .test_cli_worker import signal_arguments
from .test_cli_worker import StartFlaskWorker

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: The test app's queues, its settings, the app in this process and the worker
#: process, as in test_cli_worker.
server_queues = test_cli_worker.server_queues
app_env = test_cli_worker.app_env
web_app = test_cli_worker.web_app
start_flask_worker = test_cli_worker.start_flask_worker


def test_job_received_comes_before_the_handler_and_job_finished_has_its_result(
    web_app: Flask, start_flask_worker: StartFlaskWorker
) -> None:
    worker = start_flask_worker()
    echoed = enqueue(web_app, "critical", "echo", {"n": 1})
    failed = enqueue(web_app, "default", "fail", {"n": 2})
    worker.wait_for("job_finished", message_id=echoed)
    worker.wait_for("job_finished", message_id=failed)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0

    received = {a["message_id"]: a for a in signal_arguments(worker, "job-received")}
    assert received[echoed] == {
        "job": {"job_type": "echo", "message_id": echoed},
        "queue": "critical",
        "message_id": echoed,
        "receive_count": 1,
    }
    assert (received[failed]["queue"], received[failed]["receive_count"]) == (
        "default",
        1,
    )
    # Each job's job_received line is logged before its job_started line.
    for message_id in (echoed, failed):
        names = [
            e.get("signal") or e["event"]
            for e in worker.events
            if e.get("message_id") == message_id
            or e.get("arguments", {}).get("message_id") == message_id
        ]
        assert names.index("job-received") < names.index("job_started"), names
    finished = {a["message_id"]: a for a in signal_arguments(worker, "job-finished")}
    assert (finished[echoed]["result"], finished[echoed]["will_retry"]) == (
        {"echo": {"n": 1}},
        False,
    )
    assert (finished[failed]["result"], finished[failed]["will_retry"]) == (None, True)
    assert signal_arguments(worker, "worker-error") == []


def test_a_queue_deleted_under_the_worker_is_a_receive_error(
    web_app: Flask,
    start_flask_worker: StartFlaskWorker,
    sqs_client: SQSClient,
    server_queues: dict[str, str],
) -> None:
    worker = start_flask_worker()
    sqs_client.delete_queue(QueueUrl=server_queues["critical"])
    error = worker.wait_for("signal_received", signal="worker-error", timeout=30)
    assert error["sender_is_app"]
    assert (error["arguments"]["queue"], error["arguments"]["kind"]) == (
        "critical",
        "receive",
    )
    assert error["arguments"]["exception"]  # the botocore error's type
    # The other queue is still served, and the worker stops as usual.
    served = enqueue(web_app, "default", "record", {"n": 1})
    assert worker.wait_for("job_finished", message_id=served)["outcome"] == "success"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
    errors = signal_arguments(worker, "worker-error")
    assert {(a["queue"], a["kind"]) for a in errors} == {("critical", "receive")}
