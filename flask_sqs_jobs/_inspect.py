"""Inspect queues and move dead letters, behind ``flask sqs-jobs stats`` and ``dlq``."""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

from .engine._wire import DEAD_LETTER_ATTRIBUTE
from .engine._wire import decode_body

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

_COUNT_ATTRIBUTES = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}
#: How long listed or moved dead letters stay hidden while the command runs.
_PEEK_VISIBILITY_SECONDS = 60
_SENDABLE_ATTRIBUTE_KEYS = ("DataType", "StringValue", "BinaryValue")


def queue_stats(client: SQSClient, url: str) -> dict[str, t.Any]:
    """The approximate counts of a queue, and its dead-letter queue's URL if any."""
    names: list[t.Any] = [*_COUNT_ATTRIBUTES.values(), "RedrivePolicy"]
    response = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)
    attributes: dict[str, str] = dict(t.cast(t.Any, response["Attributes"]))
    stats: dict[str, t.Any] = {
        key: int(attributes.get(name, 0)) for key, name in _COUNT_ATTRIBUTES.items()
    }
    stats["dead_letter_url"] = dead_letter_url(client, attributes.get("RedrivePolicy"))
    return stats


def dead_letter_url(client: SQSClient, redrive_policy: str | None) -> str | None:
    if not redrive_policy:
        return None
    arn = str(json.loads(redrive_policy)["deadLetterTargetArn"]).split(":")
    return client.get_queue_url(QueueName=arn[-1], QueueOwnerAWSAccountId=arn[-2])[
        "QueueUrl"
    ]


def receive_all(
    client: SQSClient, url: str, limit: int | None
) -> list[dict[str, t.Any]]:
    """Receive up to ``limit`` distinct messages, hiding them while the command runs."""
    received: dict[str, dict[str, t.Any]] = {}
    while limit is None or len(received) < limit:
        batch = min(10, limit - len(received)) if limit is not None else 10
        messages = client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=batch,
            VisibilityTimeout=_PEEK_VISIBILITY_SECONDS,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in messages if m["MessageId"] not in received]
        if not fresh:
            break
        for message in fresh:
            received[message["MessageId"]] = dict(message)
    return list(received.values())


def make_visible(client: SQSClient, url: str, messages: list[dict[str, t.Any]]) -> None:
    """Put received messages back on the queue at once, untouched."""
    for start in range(0, len(messages), 10):
        chunk = messages[start : start + 10]
        client.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[
                {
                    "Id": str(i),
                    "ReceiptHandle": m["ReceiptHandle"],
                    "VisibilityTimeout": 0,
                }
                for i, m in enumerate(chunk)
            ],
        )


def describe_dead_letter(message: cabc.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What an operator needs to know about one dead letter."""
    body = message.get("Body", "")
    decoded = decode_body(body)
    attributes = message.get("MessageAttributes") or {}
    reason_text = (attributes.get(DEAD_LETTER_ATTRIBUTE) or {}).get("StringValue")
    try:
        reason = json.loads(reason_text) if reason_text else None
    except ValueError:
        reason = {"error": reason_text}
    system = message.get("Attributes") or {}
    return {
        "message_id": message.get("MessageId"),
        "job_type": None if isinstance(decoded, str) else decoded.job_type,
        "payload": None if isinstance(decoded, str) else decoded.payload,
        "body": body if isinstance(decoded, str) else None,
        "dead_letter": reason,
        "sent_timestamp": system.get("SentTimestamp"),
        "receive_count": system.get("ApproximateReceiveCount"),
    }


def redrive(
    client: SQSClient,
    dlq_url: str,
    source_url: str,
    *,
    job_type: str | None,
    limit: int | None,
) -> tuple[int, int]:
    """Move dead letters back to their source queue; return (moved, left).

    ``left`` is what the dead-letter queue still holds afterwards (SQS's
    approximate count).

    Each message is sent again with its body and attributes (less the
    ``dead_letter`` reason) and only then deleted from the dead-letter queue,
    so a failure midway never loses a job. Skipped ones are put back at once.
    """
    fifo = source_url.rstrip("/").endswith(".fifo")
    moved, skipped, seen = 0, [], set()
    while limit is None or moved < limit:
        messages = client.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=_PEEK_VISIBILITY_SECONDS,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in messages if m["MessageId"] not in seen]
        if not fresh:
            break
        for message in fresh:
            seen.add(message["MessageId"])
            wanted = job_type is None or (
                describe_dead_letter(message)["job_type"] == job_type
            )
            if not wanted or (limit is not None and moved >= limit):
                skipped.append(dict(message))
                continue
            client.send_message(**_resend_params(message, source_url, fifo))
            client.delete_message(
                QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"]
            )
            moved += 1
    make_visible(client, dlq_url, skipped)
    counts = queue_stats(client, dlq_url)
    return moved, sum(counts[key] for key in ("visible", "in_flight", "delayed"))


def _resend_params(
    message: cabc.Mapping[str, t.Any], url: str, fifo: bool
) -> dict[str, t.Any]:
    params: dict[str, t.Any] = {"QueueUrl": url, "MessageBody": message["Body"]}
    attributes = {
        name: {k: v for k, v in value.items() if k in _SENDABLE_ATTRIBUTE_KEYS}
        for name, value in (message.get("MessageAttributes") or {}).items()
        if name != DEAD_LETTER_ATTRIBUTE
    }
    if attributes:
        params["MessageAttributes"] = attributes
    if fifo:
        system = message.get("Attributes") or {}
        params["MessageGroupId"] = system.get("MessageGroupId", "redrive")
        params["MessageDeduplicationId"] = f"redrive-{message['MessageId']}"[:128]
    return params
