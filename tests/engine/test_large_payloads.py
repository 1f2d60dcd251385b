"""Large payloads through S3, against moto in-process (S3 and SQS)."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.exceptions import EndpointConnectionError
from flask_sqs_jobs import current_job
from flask_sqs_jobs import EnqueueBatchError
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import LargePayloads
from flask_sqs_jobs.engine import PayloadNotFound
from flask_sqs_jobs.engine.sqs import OFFLOADED_SEND_ATTEMPTS

from tests.engine.helpers import events
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

BUCKET = "jobs-payloads"
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
BIG = {"blob": "x" * 5000}


@pytest.fixture
def s3(sqs: SQSClient) -> t.Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


def keys(s3: t.Any, bucket: str = BUCKET) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return [item["Key"] for item in listed]


def group_of(sqs: SQSClient, url: str, s3: t.Any, **options: t.Any) -> QueueGroup:
    options.setdefault("threshold_bytes", 1000)
    large = LargePayloads(s3, bucket=BUCKET, **options)
    return QueueGroup.build(
        boto_client=sqs, queues={"jobs": {"url": url}}, large_payloads=large
    )


def run(group: QueueGroup, handlers: dict[str, t.Any], cycles: int = 1) -> None:
    JobWorker(group, handlers, stop_after(cycles), idle_wait_seconds=0).run()


def test_a_small_job_is_sent_as_is(sqs: SQSClient, queue_url: str, s3: t.Any) -> None:
    group_of(sqs, queue_url, s3).enqueue("jobs", "ping", {"n": 1})
    [message] = visible_messages(sqs, queue_url)
    assert json.loads(message["Body"])["payload"] == {"n": 1}
    assert "ExtendedPayloadSize" not in message.get("MessageAttributes", {})
    assert keys(s3) == []


def test_a_large_job_goes_through_s3_as_the_extended_client_writes_it(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    group_of(sqs, queue_url, s3).enqueue("jobs", "big", BIG)
    [message] = visible_messages(sqs, queue_url)
    pointer = json.loads(message["Body"])
    assert pointer[0] == POINTER_CLASS
    assert pointer[1]["s3BucketName"] == BUCKET
    key = pointer[1]["s3Key"]
    assert key.startswith("sqs-jobs/")
    stored = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert json.loads(stored)["payload"] == BIG
    assert message["MessageAttributes"]["ExtendedPayloadSize"] == {
        "DataType": "Number",
        "StringValue": str(len(stored)),
    }


def test_the_worker_reads_the_payload_and_deletes_the_object_after_the_message(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    group = group_of(sqs, queue_url, s3)
    group.enqueue("jobs", "big", BIG, correlation_fields={"request_id": "r-1"})
    seen: list[Payload] = []
    run(group, {"big": seen.append})
    assert seen == [BIG]
    assert message_count(sqs, queue_url) == 0
    assert keys(s3) == []


def test_always_offloads_small_jobs_and_delete_after_processing_false_keeps_them(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    group = group_of(sqs, queue_url, s3, always=True, delete_after_processing=False)
    group.enqueue("jobs", "ping", {"n": 1})
    assert len(keys(s3)) == 1
    seen: list[Payload] = []
    run(group, {"ping": seen.append})
    assert seen == [{"n": 1}]
    assert message_count(sqs, queue_url) == 0
    assert len(keys(s3)) == 1


def test_the_default_threshold_is_the_queues_maximum_message_size(
    sqs: SQSClient, s3: t.Any
) -> None:
    url = create_queue(sqs, "small-jobs", MaximumMessageSize="2048")
    group = group_of(sqs, url, s3, threshold_bytes=None)
    group.enqueue("jobs", "fits", {"blob": "x" * 1500})
    group.enqueue("jobs", "big", {"blob": "x" * 3000})
    assert len(keys(s3)) == 1


def test_enqueue_many_offloads_per_entry(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    spy = SpyClient(sqs)
    group = group_of(spy.client, queue_url, s3)
    jobs = [
        ("small", {"i": i}) if i % 2 else ("big", {"i": i, **BIG}) for i in range(6)
    ]
    ids = group.enqueue_many("jobs", jobs)
    assert len(ids) == 6
    assert len(keys(s3)) == 3
    [batch] = spy.calls_to("send_message_batch")
    assert len(batch["Entries"]) == 6
    seen: list[int] = []
    run(
        group,
        {"small": lambda p: seen.append(p["i"]), "big": lambda p: seen.append(p["i"])},
        6,
    )
    assert sorted(seen) == list(range(6))
    assert keys(s3) == []


@pytest.mark.parametrize("method", ["send_message", "send_message_batch"])
def test_a_refused_send_deletes_the_object_again(
    sqs: SQSClient, queue_url: str, s3: t.Any, method: str
) -> None:
    spy = SpyClient(sqs)
    spy.failing[method] = "InvalidParameterValue"
    group = group_of(spy.client, queue_url, s3)
    if method == "send_message":
        with pytest.raises(ClientError):
            group.enqueue("jobs", "big", BIG)
    else:
        with pytest.raises(EnqueueBatchError):
            group.enqueue_many("jobs", [("big", BIG), ("small", {})])
    assert keys(s3) == []


@pytest.mark.parametrize("method", ["send_message", "send_message_batch"])
def test_a_send_that_may_have_been_applied_keeps_its_object(
    sqs: SQSClient, queue_url: str, s3: t.Any, method: str
) -> None:
    # A 5xx or a lost answer may hide a request SQS applied: a message of
    # it may be on the queue, so its object stays. Each resend has its own.
    spy = SpyClient(sqs)
    spy.failing[method] = "InternalError"
    group = group_of(spy.client, queue_url, s3)
    if method == "send_message":
        with pytest.raises(ClientError):
            group.enqueue("jobs", "big", BIG)
    else:
        with pytest.raises(EnqueueBatchError) as caught:
            group.enqueue_many("jobs", [("big", BIG), ("small", {})])
        assert len(caught.value.failed) == 2
    assert len(keys(s3)) == OFFLOADED_SEND_ATTEMPTS == 3


def test_a_lost_answer_is_resent_with_an_object_of_its_own(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    spy = SpyClient(sqs)
    lost: list[str] = []

    def lose_the_first_answer(kwargs: dict[str, t.Any], result: t.Any) -> None:
        if not lost:
            lost.append(kwargs["MessageBody"])
            raise EndpointConnectionError(endpoint_url=queue_url)

    spy.after["send_message"] = lose_the_first_answer
    group = group_of(spy.client, queue_url, s3)
    group.enqueue("jobs", "big", {"n": 7, **BIG})
    bodies = [c["MessageBody"] for name, c in spy.calls if name == "send_message"]
    assert len(bodies) == 2
    assert bodies[0] != bodies[1]
    seen: list[int] = []
    run(group, {"big": lambda p: seen.append(p["n"])}, 2)
    assert seen == [7, 7]
    assert keys(s3) == []


def test_offloading_needs_room_for_its_size_attribute(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    attributes = {
        f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(10)
    }
    with pytest.raises(ValueError, match="ExtendedPayloadSize"):
        group_of(sqs, queue_url, s3).enqueue(
            "jobs", "big", BIG, message_attributes=attributes
        )
    assert keys(s3) == []


def test_a_retried_job_keeps_its_object(sqs: SQSClient, s3: t.Any) -> None:
    url = create_queue(sqs, "retry-jobs", visibility_timeout=0)
    group = group_of(sqs, url, s3)
    group.enqueue("jobs", "big", BIG)

    def fail(payload: Payload) -> None:
        raise RuntimeError("temporary")

    run(group, {"big": fail})
    assert message_count(sqs, url) == 1
    assert len(keys(s3)) == 1


def test_a_dead_letter_keeps_the_pointer_and_the_object(
    sqs: SQSClient, s3: t.Any
) -> None:
    dlq = create_queue(sqs, "jobs-dlq")
    url = create_queue(sqs, "dl-jobs", dead_letter_url=dlq, max_receive_count=1)
    group = group_of(sqs, url, s3)
    group.enqueue("jobs", "big", BIG)
    [sent] = visible_messages(sqs, url)

    def fail(payload: Payload) -> None:
        raise RuntimeError("boom")

    run(group, {"big": fail})
    [letter] = visible_messages(sqs, dlq)
    assert letter["Body"] == sent["Body"]
    assert "ExtendedPayloadSize" in letter["MessageAttributes"]
    assert len(keys(s3)) == 1


def test_the_job_id_is_read_from_the_fetched_body(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    group = group_of(sqs, queue_url, s3)
    group.enqueue("jobs", "big", BIG, job_id="big-1")
    [message] = visible_messages(sqs, queue_url)
    assert "big-1" not in message["Body"]
    seen: list[str | None] = []

    def big(payload: Payload) -> None:
        seen.append(current_job.job_id)

    run(group, {"big": big})
    assert seen == ["big-1"]


def test_a_deferred_job_is_resent_with_the_same_pointer(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    body = json.dumps({"job_type": "big", "payload": BIG, "run_at": later.isoformat()})
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/later", Body=body.encode())
    pointer = json.dumps(
        [POINTER_CLASS, {"s3BucketName": BUCKET, "s3Key": "sqs-jobs/later"}]
    )
    size: t.Any = {
        "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(body))}
    }
    sqs.send_message(QueueUrl=queue_url, MessageBody=pointer, MessageAttributes=size)
    spy = SpyClient(sqs)
    ran: list[Payload] = []
    run(group_of(spy.client, queue_url, s3), {"big": ran.append})
    assert ran == []
    [resent] = spy.calls_to("send_message")
    assert resent["MessageBody"] == pointer
    assert resent["MessageAttributes"] == size
    assert resent["DelaySeconds"] == 900
    assert keys(s3) == ["sqs-jobs/later"]


def test_a_missing_object_is_dead_lettered_with_payload_not_found(
    sqs: SQSClient, s3: t.Any, logs: list[EventDict]
) -> None:
    dlq = create_queue(sqs, "jobs-dlq")
    url = create_queue(sqs, "missing-jobs", dead_letter_url=dlq, max_receive_count=5)
    group = group_of(sqs, url, s3)
    group.enqueue("jobs", "big", BIG)
    [key] = keys(s3)
    s3.delete_object(Bucket=BUCKET, Key=key)
    ran: list[Payload] = []
    run(group, {"big": ran.append})
    assert ran == []
    assert message_count(sqs, url) == 0
    [letter] = visible_messages(sqs, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PayloadNotFound"
    assert only_event(logs, "large_payload_missing")["outcome"] == "dead_lettered"


def test_a_missing_object_without_a_dead_letter_queue_is_deleted(
    sqs: SQSClient, queue_url: str, s3: t.Any, logs: list[EventDict]
) -> None:
    group = group_of(sqs, queue_url, s3)
    group.enqueue("jobs", "big", BIG)
    [key] = keys(s3)
    s3.delete_object(Bucket=BUCKET, Key=key)
    run(group, {"big": lambda p: None})
    assert message_count(sqs, queue_url) == 0
    assert only_event(logs, "large_payload_missing")["outcome"] == "delete"
    assert issubclass(PayloadNotFound, NonRetryableError)


class FailingGets:
    """An S3 client whose GetObject fails with another error than NoSuchKey."""

    def __init__(self, client: t.Any) -> None:
        self.wrapped = client

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self.wrapped, name)

    def get_object(self, **kwargs: t.Any) -> t.Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "Get")


def test_another_s3_error_leaves_the_message_for_redelivery(
    sqs: SQSClient, s3: t.Any, logs: list[EventDict]
) -> None:
    url = create_queue(sqs, "s3-down-jobs", visibility_timeout=0)
    group_of(sqs, url, s3).enqueue("jobs", "big", BIG)
    run(group_of(sqs, url, FailingGets(s3)), {"big": lambda p: None})
    assert message_count(sqs, url) == 1
    assert len(keys(s3)) == 1
    assert events(logs, "large_payload_unavailable")


def test_the_legacy_size_attribute_is_read_too(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    body = json.dumps({"job_type": "big", "payload": {"n": 1}})
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/legacy", Body=body.encode())
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(
            [
                "com.amazon.sqs.javamessaging.MessageS3Pointer",
                {"s3BucketName": BUCKET, "s3Key": "sqs-jobs/legacy"},
            ]
        ),
        MessageAttributes={
            "SQSLargePayloadSize": {"DataType": "Number", "StringValue": str(len(body))}
        },
    )
    seen: list[Payload] = []
    run(group_of(sqs, queue_url, s3), {"big": seen.append})
    assert seen == [{"n": 1}]
    assert keys(s3) == []


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"bucket": 3}, TypeError, "bucket"),
        ({"bucket": "Not_A_Bucket"}, ValueError, "bucket"),
        ({"bucket": BUCKET, "prefix": None}, TypeError, "prefix"),
        ({"bucket": BUCKET, "threshold_bytes": "10"}, TypeError, "threshold_bytes"),
        ({"bucket": BUCKET, "threshold_bytes": -1}, ValueError, "threshold_bytes"),
        (
            {"bucket": BUCKET, "threshold_bytes": 1_048_577},
            ValueError,
            r"threshold_bytes must be at most 1,048,576 .*; got 1,048,577",
        ),
        ({"bucket": BUCKET, "max_bytes": 0}, ValueError, "max_bytes must be >= 1"),
        ({"bucket": BUCKET, "max_bytes": -5}, ValueError, "max_bytes must be >= 1"),
        ({"bucket": BUCKET, "max_bytes": "64MiB"}, TypeError, "max_bytes must be"),
        ({"bucket": BUCKET, "max_bytes": 1.5}, TypeError, "max_bytes must be"),
        ({"bucket": BUCKET, "max_bytes": True}, TypeError, "max_bytes must be"),
        ({"bucket": BUCKET, "max_bytes": None}, TypeError, "max_bytes must be"),
        ({"bucket": BUCKET, "always": 1}, TypeError, "always"),
        (
            {"bucket": BUCKET, "delete_after_processing": "no"},
            TypeError,
            "delete_after",
        ),
    ],
)
def test_bad_options_name_the_option(
    options: dict[str, t.Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        LargePayloads(object(), **options)


def test_the_largest_threshold_is_sqss_largest_message() -> None:
    large = LargePayloads(object(), bucket=BUCKET, threshold_bytes=1_048_576)
    assert large.threshold_bytes == 1_048_576
    assert LargePayloads(object(), bucket=BUCKET).max_bytes == 67_108_864


def test_an_offloaded_body_that_is_not_a_job_without_a_dlq_is_deleted_object_kept(
    sqs: SQSClient, queue_url: str, s3: t.Any, logs: list[EventDict]
) -> None:
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/junk", Body=b"not json")
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(
            [POINTER_CLASS, {"s3BucketName": BUCKET, "s3Key": "sqs-jobs/junk"}]
        ),
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": "8"}
        },
    )
    run(group_of(sqs, queue_url, s3), {"big": lambda p: None})
    unreadable = only_event(logs, "large_payload_unreadable")
    assert unreadable["outcome"] == "delete"
    assert "body is not JSON" in unreadable["error"]
    assert message_count(sqs, queue_url) == 0
    assert keys(s3) == ["sqs-jobs/junk"]


def test_a_dead_letter_with_ten_attributes_keeps_the_pointer_marker(
    sqs: SQSClient, s3: t.Any
) -> None:
    dlq = create_queue(sqs, "full-dlq")
    url = create_queue(sqs, "full-jobs", dead_letter_url=dlq, max_receive_count=1)
    attributes: t.Any = {
        f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(9)
    }
    group = group_of(sqs, url, s3)
    group.enqueue("jobs", "big", BIG, message_attributes=attributes)

    def fail(payload: Payload) -> None:
        raise RuntimeError("boom")

    run(group, {"big": fail})
    [letter] = visible_messages(sqs, dlq)
    assert "ExtendedPayloadSize" in letter["MessageAttributes"]
    assert "dead_letter" in letter["MessageAttributes"]
    assert "a8" not in letter["MessageAttributes"]


def test_a_missing_object_whose_message_cannot_be_deleted_says_so(
    sqs: SQSClient, queue_url: str, s3: t.Any, logs: list[EventDict]
) -> None:
    spy = SpyClient(sqs)
    spy.failing["delete_message"] = "InternalError"
    group = group_of(spy.client, queue_url, s3)
    group.enqueue("jobs", "big", BIG)
    [key] = keys(s3)
    s3.delete_object(Bucket=BUCKET, Key=key)
    run(group, {"big": lambda p: None})
    missing = only_event(logs, "large_payload_missing")
    assert missing["outcome"] == "delete_failed"
    assert "InternalError" in missing["delete_error"]


def test_a_queue_given_large_payloads_directly_offloads_too(
    sqs: SQSClient, queue_url: str, s3: t.Any
) -> None:
    large = LargePayloads(s3, bucket=BUCKET, threshold_bytes=1000)
    queue = SqsQueue(queue_url, boto_client=sqs, large_payloads=large)
    group = QueueGroup({"jobs": {"queue": queue}})
    group.enqueue("jobs", "big", BIG)
    assert len(keys(s3)) == 1
    seen: list[Payload] = []
    run(group, {"big": seen.append})
    assert seen == [BIG]
    assert keys(s3) == []
