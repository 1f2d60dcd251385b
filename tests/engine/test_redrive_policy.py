"""A queue's RedrivePolicy, read for every job, is parsed once per value."""

from __future__ import annotations

import typing as t

import structlog.testing
from flask_sqs_jobs import SqsQueue

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def test_an_unreadable_policy_is_logged_once_and_a_new_one_is_read(
    sqs: SQSClient,
) -> None:
    queue = SqsQueue(create_queue(sqs, "policy"), boto_client=sqs)
    queue.attributes()["RedrivePolicy"] = "not json"
    with structlog.testing.capture_logs() as logs:
        assert [queue.redrive_policy() for _ in range(3)] == [None, None, None]
    assert [e["event"] for e in logs] == ["redrive_policy_unreadable"]

    queue.attributes()["RedrivePolicy"] = (
        '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:1:dlq", "maxReceiveCount": "4"}'
    )
    assert queue.redrive_policy() == ("arn:aws:sqs:us-east-1:1:dlq", 4)
