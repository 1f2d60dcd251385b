"""Offloaded bodies are read within ``max_bytes``; what no retry fixes is dead-lettered.

Against moto's S3 in process, with :class:`SpyS3` counting the bytes taken
from each GetObject body (how much a worker holds, not its RSS) and lying
about ContentLength where a test needs a dishonest server.
"""

from __future__ import annotations

import json
import typing as t

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.exceptions import EndpointConnectionError
from botocore.exceptions import ReadTimeoutError

from tests.engine.helpers import events
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import SpyClient
from tests.engine.s3_helpers import BUCKET
from tests.engine.s3_helpers import group_of
from tests.engine.s3_helpers import job_body
from tests.engine.s3_helpers import keys
from tests.engine.s3_helpers import run
from tests.engine.s3_helpers import send_pointer
from tests.engine.s3_helpers import SpyS3
from tests.support import create_queue
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

MiB = 1024 * 1024


@pytest.fixture
def s3(sqs: SQSClient) -> t.Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def queues(sqs: SQSClient) -> tuple[str, str]:
    """A queue with a dead-letter queue: (source URL, DLQ URL)."""
    dlq = create_queue(sqs, "big-dlq")
    return create_queue(sqs, "big-jobs", dead_letter_url=dlq, max_receive_count=5), dlq


def only_letter(sqs: SQSClient, dlq: str) -> dict[str, t.Any]:
    """The one dead letter's ``dead_letter`` reason, with its body."""
    [letter] = visible_messages(sqs, dlq)
    reason = json.loads(letter["MessageAttributes"]["dead_letter"]["StringValue"])
    return {**reason, "body": letter["Body"]}


def padded(size: int) -> bytes:
    """A job body of exactly ``size`` bytes."""
    bare = job_body(blob="")
    return job_body(blob="x" * (size - len(bare)))


@pytest.mark.parametrize(("size", "runs"), [(4096, True), (4097, False)])
def test_an_object_up_to_max_bytes_runs_and_one_byte_more_is_dead_lettered(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str], size: int, runs: bool
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/edge", Body=padded(size))
    pointer = send_pointer(sqs, url, "sqs-jobs/edge", size)
    seen: list[Payload] = []
    run(group_of(sqs, url, s3, max_bytes=4096), {"big": seen.append})
    assert message_count(sqs, url) == 0
    assert len(seen) == (1 if runs else 0)
    if not runs:
        letter = only_letter(sqs, dlq)
        assert letter["error_type"] == "PayloadTooLarge"
        assert "max_bytes (4,096)" in letter["error"]
        assert letter["body"] == pointer
        assert keys(s3) == ["sqs-jobs/edge"]


def test_an_announced_size_past_max_bytes_is_dead_lettered_without_a_get(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str], logs: list[EventDict]
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/huge", Body=padded(5000))
    send_pointer(sqs, url, "sqs-jobs/huge", 3 * 1024**3)
    spy = SpyS3(s3)
    run(group_of(sqs, url, spy, max_bytes=1000), {"big": lambda p: None})
    assert "get_object" not in spy.calls
    letter = only_letter(sqs, dlq)
    assert letter["error_type"] == "PayloadTooLarge"
    assert "announced as 3,221,225,472 bytes" in letter["error"]
    assert only_event(logs, "large_payload_too_large")["outcome"] == "dead_lettered"
    assert keys(s3) == ["sqs-jobs/huge"]


def test_an_object_larger_than_its_pointer_announces_is_not_read(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str]
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/liar", Body=padded(2 * MiB))
    send_pointer(sqs, url, "sqs-jobs/liar", 10)
    spy = SpyS3(s3)
    seen: list[Payload] = []
    run(group_of(sqs, url, spy), {"big": seen.append})
    assert seen == []
    assert spy.bytes_read == 0  # ContentLength gave it away
    assert all(body.closed for body in spy.bodies)
    letter = only_letter(sqs, dlq)
    assert letter["error_type"] == "PayloadTooLarge"
    assert (
        "2,097,152 bytes, more than its pointer announces (10 bytes)"
        in (letter["error"])
    )
    assert keys(s3) == ["sqs-jobs/liar"]


@pytest.mark.parametrize("content_length", [10, None], ids=["lying", "absent"])
def test_a_server_lying_about_the_length_gets_one_byte_past_the_announced_size(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str], content_length: int | None
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/liar", Body=padded(2 * MiB))
    send_pointer(sqs, url, "sqs-jobs/liar", 10)
    spy = SpyS3(s3, content_length=content_length)
    run(group_of(sqs, url, spy), {"big": lambda p: None})
    assert spy.bytes_read == 11
    assert all(body.closed for body in spy.bodies)
    letter = only_letter(sqs, dlq)
    assert letter["error_type"] == "PayloadTooLarge"
    assert "not read whole" in letter["error"]


def test_an_endless_body_without_a_usable_size_is_cut_at_max_bytes(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str]
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/endless", Body=b"{}")
    send_pointer(sqs, url, "sqs-jobs/endless", "not-a-number")
    spy = SpyS3(s3, content_length=None, endless=True)
    run(group_of(sqs, url, spy, max_bytes=MiB), {"big": lambda p: None})
    assert spy.bytes_read == MiB + 1
    assert all(body.closed for body in spy.bodies)
    assert only_letter(sqs, dlq)["error_type"] == "PayloadTooLarge"


def test_a_too_large_object_without_a_dead_letter_queue_is_deleted_and_kept_in_s3(
    sqs: SQSClient, s3: t.Any, queue_url: str, logs: list[EventDict]
) -> None:
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/big", Body=padded(5000))
    send_pointer(sqs, queue_url, "sqs-jobs/big", 5000)
    run(group_of(sqs, queue_url, s3, max_bytes=1000), {"big": lambda p: None})
    assert message_count(sqs, queue_url) == 0
    assert only_event(logs, "large_payload_too_large")["outcome"] == "delete"
    assert keys(s3) == ["sqs-jobs/big"]


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (b'{"job_type": "big", "payload": {"s": "\xff\xfe"}}', "not UTF-8"),
        (b"\xed\xa0\x80", "not UTF-8"),  # an encoded lone surrogate
        (b"not json", "body is not JSON"),
        (b"[1, 2]", "body is not a JSON object"),
        (b'{"payload": {}}', "job_type is missing"),
        (b'{"job_type": "big", "payload": 3}', "payload is missing or not"),
        (b"", "body is not JSON"),
    ],
)
def test_a_body_that_is_not_a_utf8_job_is_dead_lettered_and_kept(
    sqs: SQSClient,
    s3: t.Any,
    queues: tuple[str, str],
    logs: list[EventDict],
    stored: bytes,
    reason: str,
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/odd", Body=stored)
    send_pointer(sqs, url, "sqs-jobs/odd", len(stored))
    run(group_of(sqs, url, s3), {"big": lambda p: None})
    assert message_count(sqs, url) == 0
    letter = only_letter(sqs, dlq)
    assert letter["error_type"] == "PayloadUnreadable"
    assert reason in letter["error"]
    assert "s3://jobs-payloads/sqs-jobs/odd" in letter["error"]
    assert only_event(logs, "large_payload_unreadable")["outcome"] == "dead_lettered"
    assert not events(logs, "large_payload_unavailable")
    assert keys(s3) == ["sqs-jobs/odd"]


def test_a_failed_move_to_the_dead_letter_queue_leaves_the_message(
    sqs: SQSClient, s3: t.Any, queues: tuple[str, str], logs: list[EventDict]
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/odd", Body=b"not json")
    send_pointer(sqs, url, "sqs-jobs/odd", 8)
    spy = SpyClient(sqs)
    spy.failing["send_message"] = "InternalError"
    run(group_of(spy.client, url, s3), {"big": lambda p: None})
    assert message_count(sqs, url) == 1
    assert visible_messages(sqs, dlq) == []
    assert only_event(logs, "large_payload_unreadable")["outcome"] == "retry"


class FailingS3:
    """An S3 client whose GetObject, or its body's read, fails with ``error``."""

    def __init__(self, client: t.Any, error: Exception, *, on_read: bool) -> None:
        self.wrapped, self.error, self.on_read = client, error, on_read

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self.wrapped, name)

    def get_object(self, **kwargs: t.Any) -> t.Any:
        if not self.on_read:
            raise self.error
        response = self.wrapped.get_object(**kwargs)
        error = self.error

        class Broken:
            def read(self, amt: int | None = None) -> bytes:
                raise error

            def close(self) -> None:
                response["Body"].close()

        return {**response, "Body": Broken()}


def client_error(code: str, status: int) -> ClientError:
    response: t.Any = {
        "Error": {"Code": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("error", "on_read"),
    [
        (client_error("SlowDown", 503), False),
        (client_error("InternalError", 500), False),
        (client_error("AccessDenied", 403), False),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), False),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectionResetError("reset by peer"), True),
    ],
    ids=["throttled", "5xx", "access", "network", "read-timeout", "reset-mid-body"],
)
def test_only_s3_errors_leave_the_message_for_a_retry(
    sqs: SQSClient,
    s3: t.Any,
    queues: tuple[str, str],
    logs: list[EventDict],
    error: Exception,
    on_read: bool,
) -> None:
    url, dlq = queues
    s3.put_object(Bucket=BUCKET, Key="sqs-jobs/job", Body=job_body())
    send_pointer(sqs, url, "sqs-jobs/job", len(job_body()))
    failing = FailingS3(s3, error, on_read=on_read)
    run(group_of(sqs, url, failing), {"big": lambda p: None})
    assert message_count(sqs, url) == 1
    assert visible_messages(sqs, dlq) == []
    assert only_event(logs, "large_payload_unavailable")["outcome"] == "retry"
    assert keys(s3) == ["sqs-jobs/job"]


def test_enqueue_refuses_a_body_larger_than_max_bytes_and_sends_nothing(
    sqs: SQSClient, s3: t.Any, queue_url: str
) -> None:
    group = group_of(sqs, queue_url, s3, threshold_bytes=100, max_bytes=2000)
    group.enqueue("jobs", "fits", {"blob": "x" * 1500})
    with pytest.raises(ValueError, match=r"max_bytes \(2,000\)"):
        group.enqueue("jobs", "big", {"blob": "x" * 3000})
    assert message_count(sqs, queue_url) == 1
    assert len(keys(s3)) == 1
