"""SQS events as the Lambda service sends them, and a context like Lambda's.

The event source mapping receives with ReceiveMessage and hands the function
each message as a record: camelCase keys, binary attributes in base64, the
queue's ARN and region. :func:`lambda_event` does the same with messages
received from a real (or moto) SQS queue, so receipt handles are real.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import time
import typing as t
import uuid

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

REGION = "us-east-1"


def queue_arn(client: SQSClient, url: str) -> str:
    return client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]


def record_of(message: t.Mapping[str, t.Any], arn: str) -> dict[str, t.Any]:
    """One record of an SQS event, from one ReceiveMessage message."""
    attributes = {
        k: v
        for k, v in (message.get("Attributes") or {}).items()
        if k
        in {
            "ApproximateReceiveCount",
            "SentTimestamp",
            "SenderId",
            "ApproximateFirstReceiveTimestamp",
            "MessageGroupId",
            "MessageDeduplicationId",
            "SequenceNumber",
            "AWSTraceHeader",
        }
    }
    message_attributes = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        converted: dict[str, t.Any] = {
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
        if "StringValue" in value:
            converted["stringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            converted["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        message_attributes[name] = converted
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": hashlib.md5(message["Body"].encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": REGION,
    }


def receive_records(
    client: SQSClient,
    url: str,
    *,
    max_records: int = 10,
    wait: int = 0,
    arn: str | None = None,
) -> list[dict[str, t.Any]]:
    """Receive up to ``max_records`` messages, as the mapping does, as records."""
    arn = arn or queue_arn(client, url)
    records: list[dict[str, t.Any]] = []
    while len(records) < max_records:
        messages = client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(10, max_records - len(records)),
            WaitTimeSeconds=wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        records.extend(record_of(m, arn) for m in messages)
    return records


def lambda_event(records: list[dict[str, t.Any]]) -> dict[str, t.Any]:
    return {"Records": records}


@dataclasses.dataclass
class FakeContext:
    """Lambda's context object: the invocation's remaining time, its ids."""

    remaining_seconds: float = 60.0
    function_name: str = "jobs-function"
    invoked_function_arn: str | None = None
    aws_request_id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))
    started: float = dataclasses.field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        left = self.remaining_seconds - (time.monotonic() - self.started)
        return max(0, int(left * 1000))
