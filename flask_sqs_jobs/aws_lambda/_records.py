"""Lambda's SQS records as ReceiveMessage messages, and the batch response."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

_ATTRIBUTE_VALUES = {"stringValue": "StringValue", "binaryValue": "BinaryValue"}


def message_of(record: cabc.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The ReceiveMessage-shaped message for one record of a Lambda SQS event."""
    attributes: dict[str, t.Any] = {}
    for name, value in (record.get("messageAttributes") or {}).items():
        converted = {"DataType": value.get("dataType", "String")}
        for lambda_key, sqs_key in _ATTRIBUTE_VALUES.items():
            if value.get(lambda_key) is not None:
                converted[sqs_key] = value[lambda_key]
        attributes[name] = converted
    return {
        "MessageId": record["messageId"],
        "ReceiptHandle": record["receiptHandle"],
        "Body": record["body"],
        "Attributes": dict(record.get("attributes") or {}),
        "MessageAttributes": attributes,
    }


def batch_item_failures(
    records: cabc.Sequence[cabc.Mapping[str, t.Any]], failed: cabc.Set[str]
) -> dict[str, list[dict[str, str]]]:
    """The ``batchItemFailures`` response for *failed* message ids.

    On a FIFO source every record after the first failing one of its message
    group is reported too, in order, so the group is not delivered out of order.
    """
    blocked: set[str] = set()
    failures: list[dict[str, str]] = []
    for record in records:
        message_id = record["messageId"]
        group = (record.get("attributes") or {}).get("MessageGroupId")
        if message_id in failed or (group is not None and group in blocked):
            failures.append({"itemIdentifier": message_id})
            if group is not None:
                blocked.add(group)
    return {"batchItemFailures": failures}
