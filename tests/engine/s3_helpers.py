"""Helpers for the large-payload tests: pointers sent by hand, a spying S3 client."""

from __future__ import annotations

import json
import typing as t

from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs.engine import LargePayloads

from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

BUCKET = "jobs-payloads"
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"


def job_body(job_type: str = "big", **payload: t.Any) -> bytes:
    return json.dumps({"job_type": job_type, "payload": payload}).encode()


def send_pointer(
    sqs: SQSClient,
    url: str,
    key: str,
    size: int | str,
    *,
    bucket: str = BUCKET,
) -> str:
    """Send a pointer to ``s3://bucket/key`` announcing ``size``; return its body."""
    body = json.dumps([POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}])
    sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(size)}
        },
    )
    return body


def keys(s3: t.Any, bucket: str = BUCKET) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return [item["Key"] for item in listed]


def group_of(
    sqs: SQSClient, url: str, s3: t.Any, name: str = "jobs", **options: t.Any
) -> QueueGroup:
    large = LargePayloads(s3, bucket=BUCKET, **options)
    return QueueGroup.build(
        boto_client=sqs, queues={name: {"url": url}}, large_payloads=large
    )


def run(group: QueueGroup, handlers: dict[str, t.Any], cycles: int = 1) -> None:
    JobWorker(group, handlers, stop_after(cycles), idle_wait_seconds=0).run()


class CountingBody:
    """A GetObject body stream that counts the bytes taken from it.

    With ``endless``, it never ends (a server sending for ever); reading past
    ``fail_after`` bytes, or reading it whole with ``read()``, fails the test
    instead of exhausting the machine.
    """

    def __init__(
        self, stream: t.Any = None, *, endless: bool = False, fail_after: int = 0
    ) -> None:
        self.stream = stream
        self.endless = endless
        self.fail_after = fail_after
        self.bytes_read = 0
        self.closed = False

    def read(self, amt: int | None = None) -> bytes:
        if self.endless:
            assert amt is not None, "an endless body was read whole"
            chunk = b"x" * amt
        else:
            chunk = bytes(self.stream.read(amt))
        self.bytes_read += len(chunk)
        assert not self.fail_after or self.bytes_read <= self.fail_after
        return chunk

    def close(self) -> None:
        self.closed = True
        if self.stream is not None:
            self.stream.close()


class SpyS3:
    """A boto3 S3 client that records its calls and can lie about GetObject.

    ``content_length`` replaces the ContentLength of every GetObject answer
    (``None`` removes it); ``endless`` answers with an endless body instead of
    the object's. :attr:`bodies` holds each answer's :class:`CountingBody`.
    """

    _KEEP = object()

    def __init__(
        self, client: t.Any, *, content_length: t.Any = _KEEP, endless: bool = False
    ) -> None:
        self.wrapped = client
        self.content_length = content_length
        self.endless = endless
        self.calls: list[str] = []
        self.bodies: list[CountingBody] = []

    def __getattr__(self, name: str) -> t.Any:
        method = getattr(self.wrapped, name)
        if name.startswith("_") or not callable(method):
            return method

        def call(**kwargs: t.Any) -> t.Any:
            self.calls.append(name)
            return method(**kwargs)

        return call

    def get_object(self, **kwargs: t.Any) -> t.Any:
        self.calls.append("get_object")
        response = dict(self.wrapped.get_object(**kwargs))
        if self.endless:
            response["Body"].close()
            body = CountingBody(endless=True, fail_after=16 * 1024 * 1024)
        else:
            body = CountingBody(response["Body"])
        response["Body"] = body
        self.bodies.append(body)
        if self.content_length is None:
            response.pop("ContentLength", None)
        elif self.content_length is not SpyS3._KEEP:
            response["ContentLength"] = self.content_length
        return response

    @property
    def bytes_read(self) -> int:
        return sum(body.bytes_read for body in self.bodies)
