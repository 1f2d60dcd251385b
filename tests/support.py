"""Helpers shared by the test tiers."""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

import boto3
from botocore.config import Config

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef


def stop_after(cycles: int) -> cabc.Callable[[], bool]:
    """A ``should_stop`` letting the worker run exactly ``cycles`` polling cycles."""
    calls = 0

    def should_stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > cycles

    return should_stop


def create_queue(
    client: SQSClient,
    name: str,
    *,
    fifo: bool = False,
    visibility_timeout: int | None = None,
    dead_letter_url: str | None = None,
    max_receive_count: int = 3,
    **attributes: str,
) -> str:
    """Create a queue (FIFO, with a redrive policy, ...) and return its URL."""
    attrs: dict[str, str] = dict(attributes)
    if fifo:
        attrs.setdefault("FifoQueue", "true")
        attrs.setdefault("ContentBasedDeduplication", "true")
    if visibility_timeout is not None:
        attrs["VisibilityTimeout"] = str(visibility_timeout)
    if dead_letter_url is not None:
        arn = client.get_queue_attributes(
            QueueUrl=dead_letter_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        attrs["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": arn, "maxReceiveCount": str(max_receive_count)}
        )
    response = client.create_queue(QueueName=name, Attributes=t.cast(t.Any, attrs))
    return response["QueueUrl"]


def visible_messages(client: SQSClient, url: str) -> list[MessageTypeDef]:
    """Receive (without hiding) every message visible on the queue now."""
    seen: dict[str, MessageTypeDef] = {}
    for _ in range(5):
        response = client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        for message in response.get("Messages", []):
            seen[message["MessageId"]] = message
    return list(seen.values())


TEST_REGION = "us-east-1"


def local_sqs_client(
    endpoint: str,
    *,
    attempts: int,
    read_timeout: float = 30,
    connect_timeout: float = 5,
    pool: int = 10,
) -> SQSClient:
    """A boto3 SQS client for a local server, with fake credentials.

    ``attempts`` is botocore's ``total_max_attempts``: 1 shows every fault,
    more rides out a busy server.
    """
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=TEST_REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            retries={"total_max_attempts": attempts, "mode": "standard"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=pool,
        ),
    )


def queue_counts(client: SQSClient, url: str) -> tuple[int, int, int]:
    """(visible, in flight, delayed) messages on the queue.

    moto counts each attribute in a pass of its own, visible ones first: a
    message whose visibility ends between two passes is counted in neither.
    Two reads in a row that agree cannot both straddle that moment.
    """
    last = _read_counts(client, url)
    for _ in range(5):
        counts = _read_counts(client, url)
        if counts == last:
            break
        last = counts
    return last


def _read_counts(client: SQSClient, url: str) -> tuple[int, int, int]:
    attributes = client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attributes.get("ApproximateNumberOfMessages", 0)),
        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


def message_count(client: SQSClient, url: str) -> int:
    """Visible + in flight + delayed messages on the queue (moto reports exactly)."""
    return sum(queue_counts(client, url))


class SourceArnClient:
    """A boto3 SQS client whose received messages carry ``DeadLetterQueueSourceArn``.

    SQS sets that attribute on a message its redrive policy moved; moto does
    not. ``arns`` maps a MessageId to the source queue's ARN to report.
    """

    def __init__(self, client: SQSClient, arns: dict[str, str]) -> None:
        self._client = client
        self.arns = arns

    def __getattr__(self, name: str) -> t.Any:
        return getattr(self._client, name)

    def receive_message(self, **params: t.Any) -> t.Any:
        response = self._client.receive_message(**params)
        for message in response.get("Messages", []):
            arn = self.arns.get(message["MessageId"])
            if arn is not None:
                message.setdefault("Attributes", {})["DeadLetterQueueSourceArn"] = arn
        return response


def queue_arn(client: SQSClient, url: str) -> str:
    return client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
