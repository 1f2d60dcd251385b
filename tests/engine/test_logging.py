"""What the engine logs, and the context every log line of a job carries."""

from __future__ import annotations

import typing as t
from unittest import mock

import pytest
import structlog
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import QueueGroup

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.support import create_queue
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

JOB_LOGGER = "flask_sqs_jobs.job"


def named_group(sqs: SQSClient, url: str) -> QueueGroup:
    """A group whose logical name ``default`` differs from the SQS name."""
    return QueueGroup.build(
        boto_client=sqs, queues={"default": {"url": url, "visibility_timeout": 0}}
    )


def test_job_started_and_job_finished_are_logged_with_their_keys(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = named_group(sqs, queue_url)
    message_id = group.enqueue("default", "ping", {"secret": "s3cr3t"})

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    started = only_event(logs, "job_started")
    finished = only_event(logs, "job_finished")
    for event in (started, finished):
        assert event["logger"] == JOB_LOGGER
        assert event["queue"] == "default"
        assert event["message_id"] == message_id
        assert event["receive_count"] == 1
        assert event["job_type"] == "ping"
    assert isinstance(started["queue_wait_ms"], int)
    assert started["queue_wait_ms"] >= 0
    assert "group_id" not in started
    assert finished["outcome"] == "success"
    assert isinstance(finished["duration_ms"], int | float)
    assert finished["duration_ms"] >= 0


def test_job_started_carries_the_group_id_on_a_fifo_queue(
    sqs: SQSClient, logs: list[EventDict]
) -> None:
    url = create_queue(sqs, "jobs.fifo", fifo=True)
    group = named_group(sqs, url)
    group.enqueue("default", "ping", {}, message_group_id="order-7")

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    assert only_event(logs, "job_started")["group_id"] == "order-7"


def test_payloads_are_never_logged(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = named_group(sqs, queue_url)
    group.enqueue("default", "ping", {"card": "4111-1111"})

    def reject(payload: Payload) -> None:
        raise NonRetryableError("refused")

    JobWorker(group, {"ping": reject}, stop_after(1), 0).run()

    assert logs
    assert not any("4111-1111" in repr(entry) for entry in logs)


def test_inside_a_handler_the_log_context_names_the_job(
    sqs: SQSClient, queue_url: str
) -> None:
    contexts: list[dict[str, t.Any]] = []
    group = named_group(sqs, queue_url)
    message_id = group.enqueue(
        "default", "ping", {}, correlation_fields={"request_id": "r-1", "user": 7}
    )

    def handler(payload: Payload) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert contexts == [
        {
            "queue": "default",
            "message_id": message_id,
            "receive_count": 1,
            "job_id": mock.ANY,
            "job_type": "ping",
            "request_id": "r-1",
            "user": 7,
        }
    ]


@pytest.mark.parametrize(
    "reserved", ["queue", "message_id", "receive_count", "job_type"]
)
def test_a_correlation_field_never_overwrites_a_reserved_key(
    sqs: SQSClient, queue_url: str, reserved: str
) -> None:
    contexts: list[dict[str, t.Any]] = []
    group = named_group(sqs, queue_url)
    message_id = group.enqueue(
        "default",
        "ping",
        {},
        correlation_fields={reserved: "forged", "request_id": "r-1"},
    )

    def handler(payload: Payload) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    (context,) = contexts
    assert context["queue"] == "default"
    assert context["message_id"] == message_id
    assert context["receive_count"] == 1
    assert context["job_type"] == "ping"
    assert context["request_id"] == "r-1"


def test_a_handlers_own_log_lines_carry_the_job_context(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = named_group(sqs, queue_url)
    message_id = group.enqueue(
        "default", "ping", {}, correlation_fields={"request_id": "r-1"}
    )

    def handler(payload: Payload) -> None:
        structlog.get_logger("app").info("charging_card")

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    line = only_event(logs, "charging_card")
    assert line["queue"] == "default"
    assert line["message_id"] == message_id
    assert line["receive_count"] == 1
    assert line["job_type"] == "ping"
    assert line["request_id"] == "r-1"


def test_one_jobs_context_does_not_leak_into_the_next(
    sqs: SQSClient, queue_url: str
) -> None:
    contexts: list[dict[str, t.Any]] = []
    group = named_group(sqs, queue_url)
    group.enqueue("default", "ping", {}, correlation_fields={"tenant_hint": "a"})
    group.enqueue("default", "ping", {})

    def handler(payload: Payload) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    JobWorker(group, {"ping": handler}, stop_after(2), 0).run()

    assert ["tenant_hint" in context for context in contexts] == [True, False]


def test_the_applications_own_log_context_is_kept(
    sqs: SQSClient, queue_url: str
) -> None:
    """The worker neither clears it nor hides it from handlers."""
    contexts: list[dict[str, t.Any]] = []
    structlog.contextvars.bind_contextvars(service="billing")
    group = named_group(sqs, queue_url)
    group.enqueue("default", "ping", {})

    def handler(payload: Payload) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert contexts[0]["service"] == "billing"
    assert structlog.contextvars.get_contextvars() == {"service": "billing"}


def test_the_library_never_configures_structlog(
    sqs: SQSClient, queue_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    for name in ("configure", "configure_once", "reset_defaults"):
        monkeypatch.setattr(structlog, name, lambda *a, _n=name, **k: calls.append(_n))
    group = one_queue_group(sqs, queue_url, visibility_timeout=0)
    for job_type in ("ok", "fails", "unknown"):
        group.enqueue("jobs", job_type, {})
    sqs.send_message(QueueUrl=queue_url, MessageBody="not json")

    def fails(payload: Payload) -> None:
        raise RuntimeError("boom")

    JobWorker(group, {"ok": lambda p: None, "fails": fails}, stop_after(4), 0).run()

    assert calls == []


def test_a_worker_logs_its_start_and_stop(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = named_group(sqs, queue_url)

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    assert only_event(logs, "worker_started")["queues"] == ["default"]
    assert events(logs, "worker_stopped")[0]["reason"] == "should_stop"
