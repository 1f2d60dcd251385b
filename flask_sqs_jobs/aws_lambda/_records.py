"""Lambda's SQS records as ReceiveMessage messages, and the batch response."""

from __future__ import annotations

import base64
import binascii
import collections.abc as cabc
import typing as t

_ATTRIBUTE_VALUES = {"stringValue": "StringValue", "binaryValue": "BinaryValue"}
#: The keys every SQS record of an event source mapping has.
_RECORD_KEYS = ("messageId", "receiptHandle", "body", "eventSourceARN")


def message_of(record: cabc.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The ReceiveMessage-shaped message for one record of a Lambda SQS event.

    A binary attribute arrives base64-encoded in the event; it is decoded to
    bytes, as boto3's ReceiveMessage gives it.
    """
    attributes: dict[str, t.Any] = {}
    for name, value in (record.get("messageAttributes") or {}).items():
        converted = {"DataType": value.get("dataType", "String")}
        for lambda_key, sqs_key in _ATTRIBUTE_VALUES.items():
            if value.get(lambda_key) is not None:
                converted[sqs_key] = value[lambda_key]
        if isinstance(converted.get("BinaryValue"), str):
            try:
                converted["BinaryValue"] = base64.b64decode(
                    converted["BinaryValue"], validate=True
                )
            except (binascii.Error, ValueError):
                del converted["BinaryValue"]
        attributes[name] = converted
    return {
        "MessageId": record["messageId"],
        "ReceiptHandle": record["receiptHandle"],
        "Body": record["body"],
        "Attributes": dict(record.get("attributes") or {}),
        "MessageAttributes": attributes,
    }


def sqs_records(event: object) -> list[cabc.Mapping[str, t.Any]]:
    """The records of an SQS event, checked; :raises ValueError: not one."""
    records = event.get("Records") if isinstance(event, cabc.Mapping) else None
    if not isinstance(records, list):
        raise ValueError(
            "flask_sqs_jobs.aws_lambda: this handler takes the events of an SQS"
            " event source mapping ({'Records': [...]}); got"
            f" {type(event).__name__}{_keys(event)}. Point an SQS trigger at the"
            " function, or invoke it with such an event"
        )
    for index, record in enumerate(records):
        source = record.get("eventSource") if isinstance(record, dict) else None
        missing = [
            k for k in _RECORD_KEYS if not isinstance(record, dict) or k not in record
        ]
        if source != "aws:sqs" or missing:
            raise ValueError(
                f"flask_sqs_jobs.aws_lambda: record {index} is not an SQS record"
                f" (eventSource {source!r}, missing {missing}); this handler"
                " takes only events of an SQS event source mapping"
            )
    return records


def _keys(event: object) -> str:
    if isinstance(event, cabc.Mapping):
        return f" with keys {sorted(map(str, event))[:10]}"
    return ""


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
        group = group_of(record)
        if message_id in failed or (group is not None and group in blocked):
            failures.append({"itemIdentifier": message_id})
            if group is not None:
                blocked.add(group)
    return {"batchItemFailures": failures}


def group_of(record: cabc.Mapping[str, t.Any]) -> str | None:
    """The FIFO message group of a record (None on a standard queue)."""
    group = (record.get("attributes") or {}).get("MessageGroupId")
    return group if isinstance(group, str) else None
