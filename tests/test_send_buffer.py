"""Buffered single enqueues: ``SQS_JOBS_SEND_BUFFER_MS`` and ``buffered=True``."""

from __future__ import annotations

import collections.abc as cabc
import time
import typing as t

import botocore.client
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.log_capture import capture_logs
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def _calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many SendMessage and SendMessageBatch requests any client makes from now."""
    counted = {"SendMessage": 0, "SendMessageBatch": 0}
    real = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009

    def count(self: t.Any, operation: str, params: t.Any) -> t.Any:
        if operation in counted:
            counted[operation] += 1
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", count)
    return counted


def _eventually(predicate: cabc.Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_request_s_single_enqueues_leave_in_batches_when_it_ends(
    make_app: MakeApp,
    app_config: dict[str, t.Any],
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A long window: only the request's end (or ten waiting) sends them.
    app = make_app({**app_config, "SQS_JOBS_SEND_BUFFER_MS": 1000})
    calls = _calls(monkeypatch)
    returned: list[str] = []

    @app.post("/orders")
    def orders() -> str:
        for n in range(25):
            returned.append(jobs.enqueue("default", "ship", {"n": n}, job_id=f"o-{n}"))
        return "ok"

    assert app.test_client().post("/orders").status_code == 200

    # Sent by the request's end, in batches of at most ten.
    assert message_count(sqs, queue_urls["default"]) == 25
    assert returned == [f"o-{n}" for n in range(25)]  # the job ids
    assert calls == {"SendMessage": 0, "SendMessageBatch": 3}


def test_buffered_true_outside_a_request_is_sent_within_the_window(
    make_app: MakeApp,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_app()
    calls = _calls(monkeypatch)
    with app.app_context():
        job_id = jobs.enqueue("default", "ship", {}, buffered=True)
        jobs.enqueue("default", "ship", {}, buffered=True)
    assert len(job_id) == 32
    _eventually(lambda: message_count(sqs, queue_urls["default"]) == 2, "never sent")
    assert calls["SendMessage"] == 0


def test_a_task_s_buffered_job_gets_its_message_id_once_sent(
    make_app: MakeApp,
    jobs: SQSJobs,
    sqs: SQSClient,
) -> None:
    @jobs.task()
    def ship(n: int) -> None: ...

    app = make_app()
    with app.app_context():
        enqueued = ship.options(buffered=True).enqueue(n=1)
        assert enqueued.message_id is None
        jobs.queue_group().send_buffer.flush()
    assert enqueued.message_id is not None
    assert len(enqueued.message_id) > 10


def test_an_entry_sqs_refuses_is_logged_with_its_job_and_sqs_s_error(
    make_app: MakeApp,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    app = make_app()
    with app.app_context():
        group = jobs.queue_group()
        jobs.enqueue("default", "ship", {}, job_id="lost-1", buffered=True)
        sqs.delete_queue(QueueUrl=queue_urls["default"])
        with capture_logs() as logs:
            group.send_buffer.flush()
    [failed] = [line for line in logs if line["event"] == "job_enqueue_failed"]
    assert failed["job_id"] == "lost-1"
    assert failed["error_code"]


@pytest.mark.parametrize("value", [-1, 1001, "10", 2.5, True])
def test_the_window_must_be_an_int_of_milliseconds(
    value: object, app_config: dict[str, t.Any]
) -> None:
    app = Flask(__name__)
    app.config.update({**app_config, "SQS_JOBS_SEND_BUFFER_MS": value})
    with pytest.raises(ValueError, match="SQS_JOBS_SEND_BUFFER_MS must be an int"):
        SQSJobs(app)


def test_without_the_setting_an_enqueue_is_one_send_message(
    make_app: MakeApp,
    jobs: SQSJobs,
    sqs: SQSClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_app()
    calls = _calls(monkeypatch)
    with app.app_context():
        message_id = jobs.enqueue("default", "ship", {})
    assert calls == {"SendMessage": 1, "SendMessageBatch": 0}
    assert message_id
