import typing as t

from flask_sqs_jobs.aws_lambda import batch_item_failures
from flask_sqs_jobs.aws_lambda import message_of


def _record(message_id: str, group: str | None = None) -> dict[str, t.Any]:
    attributes = {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"}
    if group is not None:
        attributes["MessageGroupId"] = group
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}",
        "body": '{"task": "t"}',
        "attributes": attributes,
        "messageAttributes": {
            "trace": {
                "stringValue": "abc",
                "dataType": "String",
                "stringListValues": [],
            }
        },
        "eventSource": "aws:sqs",
    }


def test_message_of_gives_receive_message_shape() -> None:
    message = message_of(_record("m1"))
    assert message["MessageId"] == "m1"
    assert message["ReceiptHandle"] == "rh-m1"
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert message["MessageAttributes"] == {
        "trace": {"DataType": "String", "StringValue": "abc"}
    }


def test_standard_source_reports_only_failures() -> None:
    records = [_record("a"), _record("b"), _record("c")]
    assert batch_item_failures(records, {"b"}) == {
        "batchItemFailures": [{"itemIdentifier": "b"}]
    }


def test_fifo_reports_rest_of_group_after_first_failure_in_order() -> None:
    records = [
        _record("a1", "A"),
        _record("b1", "B"),
        _record("a2", "A"),
        _record("a3", "A"),
    ]
    assert batch_item_failures(records, {"a2"}) == {
        "batchItemFailures": [{"itemIdentifier": "a2"}, {"itemIdentifier": "a3"}]
    }
