"""Where a pointer may point: the prefix is a folder, and a refused pointer is kept.

A pointer outside the configured bucket or prefix is never read nor deleted:
the message is dead-lettered with the reason (or, without a dead-letter
queue, left to come back), so jobs from other producers are not lost.
"""

from __future__ import annotations

import json
import typing as t

import boto3
import pytest
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import LargePayloads
from flask_sqs_jobs.engine.ops._inspection import redrive

from tests.engine.helpers import events
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.s3_helpers import BUCKET
from tests.engine.s3_helpers import group_of
from tests.engine.s3_helpers import job_body
from tests.engine.s3_helpers import keys
from tests.engine.s3_helpers import run
from tests.engine.s3_helpers import send_pointer
from tests.engine.s3_helpers import SpyS3
from tests.support import create_queue
from tests.support import message_count
from tests.support import queue_counts
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

OTHER_BUCKET = "other-payloads"
OUTSIDE = "pointer outside the configured bucket/prefix"


@pytest.fixture
def s3(sqs: SQSClient) -> t.Any:
    client = boto3.client("s3", region_name="us-east-1")
    for bucket in (BUCKET, OTHER_BUCKET):
        client.create_bucket(Bucket=bucket)
    return client


@pytest.fixture
def queues(sqs: SQSClient) -> tuple[str, str]:
    """A queue with a dead-letter queue: (source URL, DLQ URL)."""
    dlq = create_queue(sqs, "ptr-dlq")
    return create_queue(sqs, "ptr-jobs", dead_letter_url=dlq, max_receive_count=5), dlq


def put(s3: t.Any, key: str, bucket: str = BUCKET) -> int:
    body = job_body()
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    return len(body)


@pytest.mark.parametrize("prefix", ["sqs-jobs", "sqs-jobs/"])
def test_a_prefix_is_a_folder_for_writes_and_reads(
    sqs: SQSClient, s3: t.Any, queue_url: str, prefix: str
) -> None:
    assert LargePayloads(s3, bucket=BUCKET, prefix=prefix).prefix == "sqs-jobs/"
    group = group_of(sqs, queue_url, s3, prefix=prefix, always=True)
    group.enqueue("jobs", "big", {"n": 1})
    [key] = keys(s3)
    assert key.startswith("sqs-jobs/")
    seen: list[Payload] = []
    run(group, {"big": seen.append})
    assert seen == [{"n": 1}]
    assert keys(s3) == []


@pytest.mark.parametrize("prefix", ["sqs-jobs", "sqs-jobs/", "team/sqs-jobs"])
@pytest.mark.parametrize(
    "key_of",
    [
        "{base}-private/x",
        "{base}x",
        "{base}",
        "{base}/",
        "other/{base}/x",
        "{base}/../private/x",
        "{base}/x\x1b[2J",
    ],
)
def test_a_pointer_outside_the_prefix_is_dead_lettered_without_an_s3_call(
    sqs: SQSClient,
    s3: t.Any,
    queues: tuple[str, str],
    logs: list[EventDict],
    prefix: str,
    key_of: str,
) -> None:
    url, dlq = queues
    key = key_of.format(base=prefix.rstrip("/"))
    pointer = send_pointer(sqs, url, key, put(s3, key))
    spy = SpyS3(s3)
    seen: list[Payload] = []
    run(group_of(sqs, url, spy, prefix=prefix), {"big": seen.append})
    assert seen == []
    assert spy.calls == []
    assert message_count(sqs, url) == 0
    [letter] = visible_messages(sqs, dlq)
    assert letter["Body"] == pointer
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PointerRefused"
    assert OUTSIDE in reason["error"]
    assert "\x1b" not in reason["error"]
    refused = only_event(logs, "large_payload_pointer_refused")
    assert refused["outcome"] == "dead_lettered"
    assert not events(logs, "malformed_message_deleted")
    assert key in keys(s3)


def test_a_pointer_to_another_bucket_is_dead_lettered_and_its_object_untouched(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str]
) -> None:
    url, dlq = queues
    send_pointer(
        sqs, url, "sqs-jobs/x", put(s3, "sqs-jobs/x", OTHER_BUCKET), bucket=OTHER_BUCKET
    )
    spy = SpyS3(s3)
    run(group_of(sqs, url, spy), {"big": lambda p: None})
    assert spy.calls == []
    [letter] = visible_messages(sqs, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PointerRefused"
    assert "another bucket" in reason["error"]
    assert keys(s3, OTHER_BUCKET) == ["sqs-jobs/x"]


def test_a_refused_pointer_without_a_dead_letter_queue_is_left_to_come_back(
    sqs: SQSClient, s3: t.Any, logs: list[EventDict]
) -> None:
    url = create_queue(sqs, "ptr-plain", visibility_timeout=30)
    send_pointer(sqs, url, "6f1c1d2e-bare-uuid", put(s3, "6f1c1d2e-bare-uuid"))
    spy = SpyClient(sqs)
    s3_spy = SpyS3(s3)
    run(group_of(spy.client, url, s3_spy), {"big": lambda p: None})
    assert s3_spy.calls == []
    assert spy.calls_to("delete_message") == []
    assert spy.calls_to("delete_message_batch") == []
    assert queue_counts(sqs, url) == (0, 1, 0)  # hidden, not deleted
    assert visibility_changes(spy) == [300]
    refused = only_event(logs, "large_payload_pointer_refused")
    assert refused["outcome"] == "retry"
    assert refused["visibility_timeout"] == 300
    assert keys(s3) == ["6f1c1d2e-bare-uuid"]


def test_a_foreign_producers_job_runs_once_the_prefix_is_empty_and_it_is_redriven(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str]
) -> None:
    url, dlq = queues
    send_pointer(sqs, url, "0b9e2f6a-bare-uuid", put(s3, "0b9e2f6a-bare-uuid"))
    seen: list[Payload] = []
    run(group_of(sqs, url, s3), {"big": seen.append})
    assert seen == []
    assert len(visible_messages(sqs, dlq)) == 1
    anywhere = group_of(sqs, url, s3, prefix="")
    assert redrive(SqsQueue(dlq, boto_client=sqs), anywhere.queue("jobs")).moved == 1
    run(anywhere, {"big": seen.append})
    assert seen == [{}]
    assert keys(s3) == []


@pytest.mark.parametrize(
    ("key", "reason"),
    [("../private/x", OUTSIDE), ("a/../../x", OUTSIDE), ("x" * 1025, OUTSIDE)],
)
def test_an_empty_prefix_admits_any_key_of_the_bucket_but_no_escape(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str], key: str, reason: str
) -> None:
    url, dlq = queues
    send_pointer(sqs, url, "plain-key", put(s3, "plain-key"))
    send_pointer(sqs, url, key, 20)
    spy = SpyS3(s3)
    seen: list[Payload] = []
    run(group_of(sqs, url, spy, prefix=""), {"big": seen.append}, cycles=2)
    assert seen == [{}]
    assert spy.calls.count("get_object") == 1
    [letter] = visible_messages(sqs, dlq)
    assert reason in letter["MessageAttributes"]["dead_letter"]["StringValue"]


@pytest.mark.parametrize(
    "pointer",
    [{"s3BucketName": BUCKET}, {"s3BucketName": BUCKET, "s3Key": ""}, {"s3Key": "x"}],
)
def test_a_pointer_without_a_bucket_or_key_is_malformed_and_deleted(
    sqs: SQSClient, s3: t.Any, queue_url: str, logs: list[EventDict], pointer: t.Any
) -> None:
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(
            ["software.amazon.payloadoffloading.PayloadS3Pointer", pointer]
        ),
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": "10"}
        },
    )
    spy = SpyS3(s3)
    run(group_of(sqs, queue_url, spy), {"big": lambda p: None})
    assert spy.calls == []
    assert message_count(sqs, queue_url) == 0
    assert "lacks" in only_event(logs, "malformed_message_deleted")["reason"]


def test_a_worker_with_a_prefix_warns_once_that_other_keys_are_not_read(
    sqs: SQSClient, s3: t.Any, logs: list[EventDict]
) -> None:
    large = LargePayloads(s3, bucket=BUCKET)
    group = QueueGroup.build(
        boto_client=sqs,
        queues={
            "a": {"url": create_queue(sqs, "warn-a")},
            "b": {"url": create_queue(sqs, "warn-b")},
        },
        large_payloads=large,
    )
    run(group, {"big": lambda p: None})
    warning = only_event(logs, "large_payload_prefix_enforced")
    assert warning["log_level"] == "warning"
    assert warning["queues"] == ["a", "b"]
    assert warning["prefix"] == "sqs-jobs/"
    assert '"prefix": ""' in warning["reason"]


def test_a_worker_with_an_empty_prefix_does_not_warn(
    sqs: SQSClient, s3: t.Any, queue_url: str, logs: list[EventDict]
) -> None:
    run(group_of(sqs, queue_url, s3, prefix=""), {"big": lambda p: None})
    assert not events(logs, "large_payload_prefix_enforced")
