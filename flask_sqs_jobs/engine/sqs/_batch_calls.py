"""The batch calls behind a queue's group-committed deletes and visibility changes."""

from __future__ import annotations

import typing as t

from ._errors import call_error
from ._errors import CallError

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def delete_batch(client: SQSClient, url: str, receipts: list[str]) -> list[CallError]:
    """Delete up to ten messages; one DeleteMessage when there is only one."""
    if len(receipts) == 1:
        try:
            client.delete_message(QueueUrl=url, ReceiptHandle=receipts[0])
        except Exception as exc:
            return [call_error(exc)]
        return [None]
    response = client.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)],
    )
    return _batch_errors(response, len(receipts))


def change_visibility_batch(
    client: SQSClient, url: str, changes: list[tuple[str, int]]
) -> list[CallError]:
    """Set the visibility of up to ten messages; one call when there is one."""
    if len(changes) == 1:
        receipt, seconds = changes[0]
        try:
            client.change_message_visibility(
                QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=seconds
            )
        except Exception as exc:
            return [call_error(exc)]
        return [None]
    try:
        response = client.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": s}
                for i, (r, s) in enumerate(changes)
            ],
        )
    except Exception as exc:
        return [call_error(exc)] * len(changes)
    return _batch_errors(response, len(changes))


def _batch_errors(response: t.Mapping[str, t.Any], count: int) -> list[CallError]:
    errors: list[CallError] = [None] * count
    for failed in response.get("Failed", []):
        errors[int(failed["Id"])] = (
            failed.get("Code", "Unknown"),
            failed.get("Message", ""),
        )
    return errors
