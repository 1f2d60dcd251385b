"""Large payloads through S3 against a real server (S3 and SQS on one endpoint).

Also checks interoperability with AWS's own ``amazon-sqs-extended-client``: its
producer to our worker, and our producer to its consumer.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import pathlib
import subprocess
import sys
import typing as t
import uuid
from unittest import mock

import boto3
import pytest
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import LargePayloads
from flask_sqs_jobs.engine.ops._inspection import redrive

from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

from .conftest import FAKE_AWS_ENV
from .conftest import MakeQueue
from .conftest import REGION

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]
PEER = pathlib.Path(__file__).parent / "extended_client_peer.py"
BIG = {"blob": "z" * 300_000}
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
SMALL = {"n": 1}


@pytest.fixture
def s3(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> t.Any:
    """An S3 client made as any boto3 client, pointed at the server by the env."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", sqs_endpoint)
    return boto3.client("s3", region_name=REGION)


@pytest.fixture
def bucket(s3: t.Any) -> cabc.Iterator[str]:
    name = f"it-payloads-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
    for key in keys(s3, name):
        s3.delete_object(Bucket=name, Key=key)
    s3.delete_bucket(Bucket=name)


def keys(s3: t.Any, bucket: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return [item["Key"] for item in listed]


def group(
    sqs: SQSClient, url: str, s3: t.Any, bucket: str, **options: t.Any
) -> QueueGroup:
    large = LargePayloads(s3, bucket=bucket, **options)
    return QueueGroup.build(
        boto_client=sqs, queues={"jobs": {"url": url}}, large_payloads=large
    )


def run(jobs: QueueGroup, handlers: dict[str, t.Any], cycles: int = 1) -> None:
    JobWorker(jobs, handlers, stop_after(cycles), idle_wait_seconds=0).run()


def test_jobs_above_and_below_the_threshold_round_trip(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    url = make_queue("large")
    jobs = group(sqs_client, url, s3, bucket, threshold_bytes=100_000)
    jobs.enqueue("jobs", "big", BIG)
    jobs.enqueue("jobs", "small", SMALL)
    assert len(keys(s3, bucket)) == 1
    seen: list[Payload] = []
    run(jobs, {"big": seen.append, "small": seen.append}, cycles=2)
    assert len(seen) == 2
    assert BIG in seen
    assert SMALL in seen
    assert message_count(sqs_client, url) == 0
    assert keys(s3, bucket) == []


def test_a_job_past_the_queues_own_limit_goes_through_s3(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    url = make_queue("limit")
    sqs_client.set_queue_attributes(
        QueueUrl=url, Attributes={"MaximumMessageSize": "262144"}
    )
    jobs = group(sqs_client, url, s3, bucket)
    jobs.enqueue("jobs", "big", BIG)
    seen: list[Payload] = []
    run(jobs, {"big": seen.append})
    assert seen == [BIG]
    assert keys(s3, bucket) == []


def test_always_and_a_mixed_enqueue_many(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    url = make_queue("many")
    jobs = group(sqs_client, url, s3, bucket, threshold_bytes=1000)
    specs = [("job", {"i": i, **(BIG if i % 3 == 0 else {})}) for i in range(12)]
    assert len(jobs.enqueue_many("jobs", specs)) == 12
    assert len(keys(s3, bucket)) == 4
    always = group(sqs_client, url, s3, bucket, always=True)
    always.enqueue("jobs", "job", {"i": 12})
    assert len(keys(s3, bucket)) == 5
    seen: list[int] = []
    run(jobs, {"job": lambda p: seen.append(p["i"])}, cycles=13)
    assert sorted(seen) == list(range(13))
    assert keys(s3, bucket) == []


def test_retry_and_dead_letter_keep_the_object_and_redrive_then_succeeds(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    dlq = make_queue("large-dlq")
    url = make_queue("large-src", dead_letter_url=dlq, max_receive_count=2)
    jobs = group(sqs_client, url, s3, bucket, threshold_bytes=1000)
    jobs.enqueue("jobs", "big", BIG)
    [key] = keys(s3, bucket)

    def fail(payload: Payload) -> None:
        raise RuntimeError("boom")

    retrying = group(sqs_client, url, s3, bucket, threshold_bytes=1000)
    retrying.queue("jobs").visibility_timeout = 0
    run(retrying, {"big": fail})
    assert len(keys(s3, bucket)) == 1  # retried: kept
    run(retrying, {"big": fail})
    [letter] = visible_messages(sqs_client, dlq)
    pointer = json.loads(letter["Body"])  # the pointer, not the payload
    assert pointer[1] == {"s3BucketName": bucket, "s3Key": key}
    assert "ExtendedPayloadSize" in letter["MessageAttributes"]
    assert keys(s3, bucket) == [key]  # dead-lettered: kept

    moved = redrive(SqsQueue(dlq, boto_client=sqs_client), jobs.queue("jobs"))
    assert moved.moved == 1
    seen: list[Payload] = []
    run(jobs, {"big": seen.append})
    assert seen == [BIG]
    assert keys(s3, bucket) == []


def test_a_missing_object_is_dead_lettered_as_payload_not_found(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    dlq = make_queue("gone-dlq")
    url = make_queue("gone-src", dead_letter_url=dlq, max_receive_count=5)
    jobs = group(sqs_client, url, s3, bucket, threshold_bytes=1000)
    jobs.enqueue("jobs", "big", BIG)
    [key] = keys(s3, bucket)
    s3.delete_object(Bucket=bucket, Key=key)
    run(jobs, {"big": lambda p: None})
    assert message_count(sqs_client, url) == 0
    [letter] = visible_messages(sqs_client, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PayloadNotFound"


def test_a_missing_object_without_a_dead_letter_queue_is_deleted(
    sqs_client: SQSClient, make_queue: MakeQueue, s3: t.Any, bucket: str
) -> None:
    url = make_queue("gone-plain")
    jobs = group(sqs_client, url, s3, bucket, always=True)
    jobs.enqueue("jobs", "small", SMALL)
    [key] = keys(s3, bucket)
    s3.delete_object(Bucket=bucket, Key=key)
    run(jobs, {"small": lambda p: None})
    assert message_count(sqs_client, url) == 0


class Streams:
    """Wraps an S3 client: counts the bytes taken from each GetObject body.

    With ``hide_length``, the answers lose their ContentLength, as from a
    server that does not say (or lies), so only the bounded read protects.
    """

    def __init__(self, client: t.Any, *, hide_length: bool = False) -> None:
        self.wrapped, self.hide_length = client, hide_length
        self.bytes_read = 0

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self.wrapped, name)

    def get_object(self, **kwargs: t.Any) -> t.Any:
        response = dict(self.wrapped.get_object(**kwargs))
        if self.hide_length:
            response.pop("ContentLength", None)
        stream, owner = response["Body"], self

        class Counted:
            def read(self, amt: int | None = None) -> bytes:
                chunk: bytes = stream.read(amt)
                owner.bytes_read += len(chunk)
                return chunk

            def close(self) -> None:
                stream.close()

        response["Body"] = Counted()
        return response


@pytest.mark.parametrize("hide_length", [False, True], ids=["length", "no-length"])
def test_an_object_larger_than_announced_is_dead_lettered_after_a_bounded_read(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    s3: t.Any,
    bucket: str,
    hide_length: bool,
) -> None:
    dlq = make_queue("liar-dlq")
    url = make_queue("liar-src", dead_letter_url=dlq, max_receive_count=5)
    s3.put_object(Bucket=bucket, Key="sqs-jobs/liar", Body=b"x" * (8 * 1024 * 1024))
    sqs_client.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            [POINTER_CLASS, {"s3BucketName": bucket, "s3Key": "sqs-jobs/liar"}]
        ),
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": "10"}
        },
    )
    # An honest job after it, read over the same client's connections.
    group(sqs_client, url, s3, bucket, always=True).enqueue("jobs", "big", BIG)
    sizes = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    honest = sum(size for key, size in sizes.items() if key != "sqs-jobs/liar")
    streams = Streams(s3, hide_length=hide_length)
    seen: list[Payload] = []
    run(group(sqs_client, url, streams, bucket), {"big": seen.append}, cycles=2)
    assert seen == [BIG]
    assert streams.bytes_read == honest + (11 if hide_length else 0)
    [letter] = visible_messages(sqs_client, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PayloadTooLarge"
    assert keys(s3, bucket) == ["sqs-jobs/liar"]


def test_the_aws_extended_clients_job_is_dead_lettered_not_deleted_by_default(
    sqs_client: SQSClient,
    sqs_endpoint: str,
    make_queue: MakeQueue,
    s3: t.Any,
    bucket: str,
) -> None:
    dlq = make_queue("from-aws-dlq")
    url = make_queue("from-aws-prefixed", dead_letter_url=dlq, max_receive_count=5)
    peer(
        "send",
        sqs_endpoint,
        url,
        bucket,
        json.dumps({"job_type": "big", "payload": SMALL}),
    )
    [key] = keys(s3, bucket)
    seen: list[Payload] = []
    run(group(sqs_client, url, s3, bucket), {"big": seen.append})
    assert seen == []
    assert message_count(sqs_client, url) == 0
    [letter] = visible_messages(sqs_client, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "PointerRefused"
    assert keys(s3, bucket) == [key]


def peer(
    mode: str, endpoint: str, url: str, bucket: str, body: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run AWS's extended client in its own process (it patches boto3 globally)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **FAKE_AWS_ENV,
        "AWS_ENDPOINT_URL_S3": endpoint,
    }
    return subprocess.run(
        [sys.executable, str(PEER), mode, endpoint, url, bucket],
        input=body,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )


def test_the_aws_extended_client_produces_for_our_worker(
    sqs_client: SQSClient,
    sqs_endpoint: str,
    make_queue: MakeQueue,
    s3: t.Any,
    bucket: str,
) -> None:
    url = make_queue("from-aws")
    body = json.dumps({"job_type": "big", "payload": BIG})
    peer("send", sqs_endpoint, url, bucket, body)
    assert len(keys(s3, bucket)) == 1
    # Its keys are bare UUIDs: a worker reading them has no key prefix.
    jobs = group(sqs_client, url, s3, bucket, prefix="")
    seen: list[Payload] = []
    run(jobs, {"big": seen.append})
    assert seen == [BIG]
    assert keys(s3, bucket) == []


def test_our_producer_sends_to_the_aws_extended_client(
    sqs_client: SQSClient,
    sqs_endpoint: str,
    make_queue: MakeQueue,
    s3: t.Any,
    bucket: str,
) -> None:
    url = make_queue("to-aws")
    group(sqs_client, url, s3, bucket, threshold_bytes=1000).enqueue("jobs", "big", BIG)
    received = peer("receive", sqs_endpoint, url, bucket)
    assert json.loads(received.stdout) == {
        "job_type": "big",
        "payload": BIG,
        "job_id": mock.ANY,
    }
    assert keys(s3, bucket) == []
    assert message_count(sqs_client, url) == 0
