"""A dead letter keeps the job's own attributes, and says what had to go."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask_sqs_jobs import JobWorker

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.support import create_queue
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


@pytest.fixture
def dlq_url(sqs: SQSClient) -> str:
    return create_queue(sqs, "jobs-dlq")


def dead_letter(
    sqs: SQSClient, dlq_url: str, attributes: dict[str, dict[str, str]]
) -> dict[str, t.Any]:
    """Send a job with ``attributes``, fail its last receive, return the dead letter."""
    url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=1)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"job_type": "charge", "payload": {}}),
        MessageAttributes=t.cast(t.Any, attributes),
    )

    def charge(payload: Payload) -> None:
        raise ValueError("card declined")

    group = one_queue_group(sqs, url, visibility_timeout=0)
    JobWorker(group, {"charge": charge}, stop_after(1), idle_wait_seconds=0).run()
    (dead,) = visible_messages(sqs, dlq_url)
    return dict(dead["MessageAttributes"])


def test_propagation_attributes_make_room_for_the_reason(
    sqs: SQSClient, dlq_url: str, logs: list[EventDict]
) -> None:
    own = {f"attr{i}": string(str(i)) for i in range(7)}
    propagation = {
        "correlation_fields": string('{"request_id": "r-1"}'),
        "traceparent": string("00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        "baggage": string("k=v"),
    }

    received = dead_letter(sqs, dlq_url, {**own, **propagation})

    assert set(received) == {*own, "correlation_fields", "traceparent", "dead_letter"}
    assert json.loads(received["dead_letter"]["StringValue"])["error_type"] == (
        "ValueError"
    )
    warning = only_event(logs, "dead_letter_attributes_dropped")
    assert warning["log_level"] == "warning"
    assert warning["dropped"] == ["baggage"]
    assert warning["job_attributes_dropped"] is False
    assert only_event(logs, "job_finished")["outcome"] == "dead_lettered"


def test_with_ten_own_attributes_the_last_one_goes_and_the_log_says_so(
    sqs: SQSClient, dlq_url: str, logs: list[EventDict]
) -> None:
    own = {f"attr{i}": string(str(i)) for i in range(10)}

    received = dead_letter(sqs, dlq_url, own)

    assert set(received) == {*list(own)[:9], "dead_letter"}
    warning = only_event(logs, "dead_letter_attributes_dropped")
    assert warning["dropped"] == ["attr9"]
    assert warning["job_attributes_dropped"] is True


def test_a_job_with_room_left_loses_nothing(
    sqs: SQSClient, dlq_url: str, logs: list[EventDict]
) -> None:
    own = {f"attr{i}": string(str(i)) for i in range(9)}

    received = dead_letter(sqs, dlq_url, own)

    assert set(received) == {*own, "dead_letter"}
    assert not [e for e in logs if e["event"] == "dead_letter_attributes_dropped"]
