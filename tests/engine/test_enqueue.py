"""QueueGroup.enqueue: the wire format it sends and the validation before sending."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import typing as t
from unittest import mock

import pytest
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import UnknownQueueError

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef
    from structlog.typing import EventDict


class TraceHeaders(JobMiddleware):
    """Adds trace headers to every job it produces."""

    injects_trace_headers = True

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        job.trace_headers.update(self.headers)
        return call_next(job)


def only_message(sqs: SQSClient, url: str) -> MessageTypeDef:
    messages = visible_messages(sqs, url)
    assert len(messages) == 1
    return messages[0]


def sent_body(spy: SpyClient) -> dict[str, t.Any]:
    (params,) = spy.calls_to("send_message")
    body: dict[str, t.Any] = json.loads(params["MessageBody"])
    return body


def test_enqueue_returns_the_message_id_sqs_assigned(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)

    message_id = group.enqueue("jobs", "send_email", {"user_id": 42})

    assert isinstance(message_id, str)
    assert only_message(sqs, queue_url)["MessageId"] == message_id


def test_the_body_is_exactly_job_type_payload_and_job_id_as_json(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)

    group.enqueue("jobs", "send_email", {"user_id": 42, "tags": ["a", "é"]})

    body = json.loads(only_message(sqs, queue_url)["Body"])
    assert body == {
        "job_type": "send_email",
        "payload": {"user_id": 42, "tags": ["a", "é"]},
        "job_id": mock.ANY,
    }


@pytest.mark.parametrize("payload", [None, "omitted"])
def test_a_missing_payload_is_sent_as_an_empty_object(
    sqs: SQSClient, queue_url: str, payload: str | None
) -> None:
    group = one_queue_group(sqs, queue_url)

    if payload is None:
        group.enqueue("jobs", "ping", None)
    else:
        group.enqueue("jobs", "ping")

    body = json.loads(only_message(sqs, queue_url)["Body"])
    assert body == {"job_type": "ping", "payload": {}, "job_id": mock.ANY}


def test_correlation_fields_travel_in_one_json_string_attribute(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)
    fields = {"request_id": "r-1", "user": 7}

    group.enqueue("jobs", "ping", {}, correlation_fields=fields)

    attributes = only_message(sqs, queue_url)["MessageAttributes"]
    assert set(attributes) == {"correlation_fields", "job_type"}
    assert attributes["correlation_fields"]["DataType"] == "String"
    assert json.loads(attributes["correlation_fields"]["StringValue"]) == fields


def test_trace_headers_set_by_a_produce_middleware_travel_one_attribute_each(
    sqs: SQSClient, queue_url: str
) -> None:
    headers = {"traceparent": "00-abc-def-01", "baggage": "k=v"}
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)}},
        middleware=[TraceHeaders(headers)],
    )

    group.enqueue("jobs", "ping", {})

    attributes = only_message(sqs, queue_url)["MessageAttributes"]
    assert attributes == {
        name: {"DataType": "String", "StringValue": value}
        for name, value in {**headers, "job_type": "ping"}.items()
    }


def test_caller_message_attributes_win_over_propagation_attributes(
    sqs: SQSClient, queue_url: str
) -> None:
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)}},
        middleware=[TraceHeaders({"traceparent": "from-middleware"})],
    )

    group.enqueue(
        "jobs",
        "ping",
        {},
        message_attributes={
            "traceparent": {"DataType": "String", "StringValue": "from-caller"}
        },
    )

    attributes = only_message(sqs, queue_url)["MessageAttributes"]
    assert attributes["traceparent"]["StringValue"] == "from-caller"


def test_every_kind_of_attribute_sqs_accepts_is_sent(
    sqs: SQSClient, queue_url: str
) -> None:
    attributes: dict[str, dict[str, t.Any]] = {
        "tenant": {"DataType": "String", "StringValue": "acme"},
        "price.eur": {"DataType": "Number.float", "StringValue": "-1.5"},
        "count": {"DataType": "Number", "StringValue": "42"},
        "blob_v-2": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        "Amazonian": {"DataType": "String.custom", "StringValue": "not reserved"},
    }

    one_queue_group(sqs, queue_url).enqueue(
        "jobs", "ping", {}, message_attributes=attributes
    )

    assert only_message(sqs, queue_url)["MessageAttributes"] == {
        **attributes,
        "job_type": {"DataType": "String", "StringValue": "ping"},
    }


def test_propagation_attributes_beyond_ten_are_dropped_from_the_end_with_a_warning(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)}},
        middleware=[TraceHeaders({"h1": "1", "h2": "2", "h3": "3"})],
    )
    caller = {
        f"attr{i}": {"DataType": "String", "StringValue": str(i)} for i in range(8)
    }

    group.enqueue(
        "jobs",
        "ping",
        {},
        correlation_fields={"request_id": "r-1"},
        message_attributes=caller,
    )

    attributes = only_message(sqs, queue_url)["MessageAttributes"]
    assert set(attributes) == {*caller, "correlation_fields", "h1"}
    warning = only_event(logs, "propagation_attributes_dropped")
    assert warning["log_level"] == "warning"
    assert warning["dropped"] == ["h2", "h3", "job_type"]


def test_every_message_carries_its_job_type_which_is_dropped_first_at_the_limit(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = one_queue_group(sqs, queue_url)
    caller = {
        f"attr{i}": {"DataType": "String", "StringValue": str(i)} for i in range(9)
    }

    group.enqueue("jobs", "ping", {}, message_attributes={"attr0": caller["attr0"]})
    group.enqueue(
        "jobs",
        "ping",
        {},
        correlation_fields={"request_id": "r-1"},
        message_attributes=caller,
    )

    first, second = sorted(
        visible_messages(sqs, queue_url),
        key=lambda message: len(message["MessageAttributes"]),
    )
    assert first["MessageAttributes"]["job_type"] == {
        "DataType": "String",
        "StringValue": "ping",
    }
    assert set(second["MessageAttributes"]) == {*caller, "correlation_fields"}
    warning = only_event(logs, "propagation_attributes_dropped")
    assert warning["dropped"] == ["job_type"]


def test_enqueue_logs_job_enqueued_with_queue_job_type_and_message_id(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = one_queue_group(sqs, queue_url)

    message_id = group.enqueue("jobs", "send_email", {"user_id": 1})

    event = only_event(logs, "job_enqueued")
    assert event["logger"] == "flask_sqs_jobs.job"
    assert event["queue"] == "jobs"
    assert event["job_type"] == "send_email"
    assert event["message_id"] == message_id
    assert "payload" not in event


NAIVE = dt.datetime(2030, 1, 1, 12, 0)
STRING = "String"
#: (id, name, attribute, error, message) of attributes SQS or botocore refuse.
BAD_ATTRIBUTES: list[tuple[str, t.Any, t.Any, type[Exception], str]] = [
    ("int StringValue", "a", {"DataType": STRING, "StringValue": 5}, TypeError, "str"),
    (
        "bytes StringValue",
        "a",
        {"DataType": STRING, "StringValue": b"x"},
        TypeError,
        "str",
    ),
    ("int Number", "a", {"DataType": "Number", "StringValue": 5}, TypeError, "str"),
    (
        "str BinaryValue",
        "a",
        {"DataType": "Binary", "BinaryValue": "x"},
        TypeError,
        "bytes",
    ),
    (
        "Binary as StringValue",
        "a",
        {"DataType": "Binary", "StringValue": "x"},
        ValueError,
        "'BinaryValue'",
    ),
    (
        "String as BinaryValue",
        "a",
        {"DataType": STRING, "BinaryValue": b"x"},
        ValueError,
        "'StringValue'",
    ),
    (
        "both values",
        "a",
        {"DataType": STRING, "StringValue": "x", "BinaryValue": b"x"},
        ValueError,
        "exactly",
    ),
    (
        "unknown DataType",
        "a",
        {"DataType": "Text", "StringValue": "x"},
        ValueError,
        "DataType",
    ),
    (
        "lower-case DataType",
        "a",
        {"DataType": "string", "StringValue": "x"},
        ValueError,
        "DataType",
    ),
    (
        "bad custom label",
        "a",
        {"DataType": "String.a b", "StringValue": "x"},
        ValueError,
        "DataType",
    ),
    ("empty value", "a", {"DataType": STRING, "StringValue": ""}, ValueError, "empty"),
    (
        "control character",
        "a",
        {"DataType": STRING, "StringValue": "\x00"},
        ValueError,
        "refuses",
    ),
    (
        "not a number",
        "a",
        {"DataType": "Number", "StringValue": "five"},
        ValueError,
        "decimal",
    ),
    (
        "NaN number",
        "a",
        {"DataType": "Number", "StringValue": "NaN"},
        ValueError,
        "decimal",
    ),
    ("int name", 5, {"DataType": STRING, "StringValue": "x"}, TypeError, "names"),
    (
        "name too long",
        "a" * 257,
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        "257",
    ),
    (
        "name with a space",
        "a b",
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        "letters",
    ),
    (
        "AWS. name",
        "AWS.trace",
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        "reserved",
    ),
    (
        "amazon. name",
        "amazon.x",
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        "reserved",
    ),
    (
        "name with ..",
        "a..b",
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        r"'\.\.'",
    ),
    (
        "name ending in .",
        "a.",
        {"DataType": STRING, "StringValue": "x"},
        ValueError,
        r"'\.'",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        pytest.param({"job_type": ""}, ValueError, "job_type", id="empty job_type"),
        pytest.param({"job_type": 5}, TypeError, "job_type", id="int job_type"),
        pytest.param({"job_type": None}, TypeError, "job_type", id="None job_type"),
        pytest.param({"payload": [1, 2]}, TypeError, "payload", id="list payload"),
        pytest.param({"payload": "text"}, TypeError, "payload", id="str payload"),
        pytest.param({"payload": {"obj": object()}}, TypeError, "payload", id="object"),
        pytest.param({"payload": {"x": float("nan")}}, ValueError, "payload", id="NaN"),
        pytest.param(
            {"payload": {"x": float("inf")}}, ValueError, "payload", id="infinity"
        ),
        pytest.param({"delay_seconds": -1}, ValueError, "delay_seconds", id="<0"),
        pytest.param({"delay_seconds": 1.5}, TypeError, "delay_seconds", id="float"),
        pytest.param({"delay_seconds": "5"}, TypeError, "delay_seconds", id="str"),
        pytest.param({"delay_seconds": True}, TypeError, "delay_seconds", id="bool"),
        pytest.param(
            {"delay_seconds": 10**20}, ValueError, "delay_seconds", id="huge delay"
        ),
        pytest.param(
            {"delay_seconds": 365 * 86400 + 1},
            ValueError,
            r"delay_seconds must be 0\.\.31536000 \(365 days",
            id="delay past a year",
        ),
        pytest.param(
            {"run_at": dt.datetime(2999, 1, 1, tzinfo=dt.UTC)},
            ValueError,
            "run_at may be at most 365 days ahead",
            id="run_at centuries ahead",
        ),
        pytest.param(
            {"run_at": dt.datetime.now(dt.UTC) + dt.timedelta(days=366)},
            ValueError,
            "run_at may be at most 365 days ahead",
            id="run_at past a year",
        ),
        pytest.param({"run_at": NAIVE}, ValueError, "run_at", id="naive run_at"),
        pytest.param({"run_at": "2030-01-01"}, TypeError, "run_at", id="str run_at"),
        pytest.param(
            {
                "run_at": dt.datetime(
                    9999, 12, 31, 23, tzinfo=dt.timezone(-dt.timedelta(hours=14))
                )
            },
            ValueError,
            "run_at",
            id="run_at past the last UTC datetime",
        ),
        pytest.param(
            {"message_deduplication_id": "d-1"},
            ValueError,
            "message_deduplication_id",
            id="dedup id on a standard queue",
        ),
        pytest.param(
            {"correlation_fields": ["r-1"]},
            TypeError,
            "correlation_fields",
            id="correlation_fields not a dict",
        ),
        pytest.param(
            {"message_attributes": {"a": "b"}},
            ValueError,
            "message attribute",
            id="malformed message attribute",
        ),
        *[
            pytest.param(
                {"message_attributes": {name: attribute}},
                error,
                named,
                id=case,
            )
            for case, name, attribute, error, named in BAD_ATTRIBUTES
        ],
        pytest.param(
            {
                "message_attributes": {
                    f"a{i}": {"DataType": "String", "StringValue": "v"}
                    for i in range(11)
                }
            },
            ValueError,
            "message_attributes",
            id="eleven message attributes",
        ),
    ],
)
def test_invalid_arguments_raise_naming_the_argument_before_anything_is_sent(
    sqs: SQSClient,
    queue_url: str,
    arguments: dict[str, t.Any],
    error: type[Exception],
    named: str,
) -> None:
    group = one_queue_group(sqs, queue_url)
    call: dict[str, t.Any] = {"job_type": "ping", "payload": {}, **arguments}

    with pytest.raises(error, match=named):
        group.enqueue("jobs", **call)

    assert message_count(sqs, queue_url) == 0


def test_an_unknown_queue_name_raises_an_error_that_is_a_key_and_value_error(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)

    with pytest.raises(UnknownQueueError, match="nope") as info:
        group.enqueue("nope", "ping", {})

    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, ValueError)
    assert "'jobs'" in str(info.value)
    assert message_count(sqs, queue_url) == 0


class TestFifo:
    @pytest.fixture
    def fifo_url(self, sqs: SQSClient) -> str:
        return create_queue(sqs, "jobs.fifo", fifo=True)

    def test_a_fifo_queue_needs_a_message_group_id(
        self, sqs: SQSClient, fifo_url: str
    ) -> None:
        group = one_queue_group(sqs, fifo_url)

        with pytest.raises(ValueError, match="message_group_id"):
            group.enqueue("jobs", "ping", {})

        assert message_count(sqs, fifo_url) == 0

    @pytest.mark.parametrize(
        "delay",
        [
            {"delay_seconds": 5},
            {"delay_seconds": 0},
            {"run_at": dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)},
        ],
    )
    def test_a_fifo_queue_refuses_per_message_delays(
        self, sqs: SQSClient, fifo_url: str, delay: dict[str, t.Any]
    ) -> None:
        group = one_queue_group(sqs, fifo_url)

        with pytest.raises(ValueError, match="delay_seconds"):
            group.enqueue("jobs", "ping", {}, message_group_id="g", **delay)

        assert message_count(sqs, fifo_url) == 0

    def test_without_content_based_deduplication_a_dedup_id_is_required(
        self, sqs: SQSClient
    ) -> None:
        url = create_queue(
            sqs, "plain.fifo", fifo=True, ContentBasedDeduplication="false"
        )
        group = one_queue_group(sqs, url)

        with pytest.raises(ValueError, match="message_deduplication_id"):
            group.enqueue("jobs", "ping", {}, message_group_id="g")

        group.enqueue(
            "jobs", "ping", {}, message_group_id="g", message_deduplication_id="d-1"
        )
        assert message_count(sqs, url) == 1

    def test_the_group_id_is_sent_with_the_message(
        self, sqs: SQSClient, fifo_url: str
    ) -> None:
        group = one_queue_group(sqs, fifo_url)

        group.enqueue("jobs", "ping", {}, message_group_id="order-7")

        message = only_message(sqs, fifo_url)
        assert message["Attributes"]["MessageGroupId"] == "order-7"


class TestMessageSize:
    @pytest.fixture
    def small_url(self, sqs: SQSClient) -> str:
        return create_queue(sqs, "small", MaximumMessageSize="1024")

    def test_the_limit_is_the_queues_maximum_message_size(
        self, sqs: SQSClient, small_url: str, queue_url: str
    ) -> None:
        group = QueueGroup(
            {
                "small": {"queue": SqsQueue(small_url, boto_client=sqs)},
                "jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)},
            }
        )
        fits = {"blob": "x" * 900}
        too_big = {"blob": "x" * 1100}

        group.enqueue("small", "store", fits)
        with pytest.raises(ValueError, match="MaximumMessageSize"):
            group.enqueue("small", "store", too_big)
        group.enqueue("jobs", "store", too_big)

        assert message_count(sqs, small_url) == 1
        assert message_count(sqs, queue_url) == 1

    def test_message_attributes_count_towards_the_limit(
        self, sqs: SQSClient, small_url: str
    ) -> None:
        group = one_queue_group(sqs, small_url)
        payload = {"blob": "x" * 700}

        with pytest.raises(ValueError, match="MaximumMessageSize"):
            group.enqueue(
                "jobs", "store", payload, correlation_fields={"big": "y" * 400}
            )
        group.enqueue("jobs", "store", payload)

        assert message_count(sqs, small_url) == 1

    def test_the_limit_is_read_from_the_queue_once(
        self, sqs: SQSClient, small_url: str
    ) -> None:
        spy = SpyClient(sqs)
        group = one_queue_group(spy.client, small_url)

        for _ in range(3):
            group.enqueue("jobs", "ping", {})

        assert len(spy.calls_to("get_queue_attributes")) == 1
        assert message_count(sqs, small_url) == 3

    def test_the_limit_is_one_mebibyte_when_the_queue_cannot_be_read(
        self, sqs: SQSClient, small_url: str
    ) -> None:
        spy = SpyClient(sqs)
        spy.failing["get_queue_attributes"] = "AccessDenied"
        group = one_queue_group(spy.client, small_url)

        with pytest.raises(ValueError, match="MaximumMessageSize"):
            group.enqueue("jobs", "store", {"blob": "x" * 1_048_576})

        assert spy.calls_to("send_message") == []


class TestDelays:
    def test_a_delay_up_to_fifteen_minutes_is_sent_as_delay_seconds(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        spy = SpyClient(sqs)
        group = one_queue_group(spy.client, queue_url)

        group.enqueue("jobs", "ping", {}, delay_seconds=900)

        (params,) = spy.calls_to("send_message")
        assert params["DelaySeconds"] == 900
        assert json.loads(params["MessageBody"]) == {
            "job_type": "ping",
            "payload": {},
            "job_id": mock.ANY,
        }
        assert visible_messages(sqs, queue_url) == []
        assert message_count(sqs, queue_url) == 1

    def test_a_longer_delay_becomes_a_deferral_with_run_at_in_the_body(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        spy = SpyClient(sqs)
        group = one_queue_group(spy.client, queue_url)
        before = dt.datetime.now(dt.UTC)

        group.enqueue("jobs", "ping", {"n": 1}, delay_seconds=7200)

        (params,) = spy.calls_to("send_message")
        assert params["DelaySeconds"] == 900
        body = json.loads(params["MessageBody"])
        assert body["job_type"] == "ping"
        assert body["payload"] == {"n": 1}
        run_at = dt.datetime.fromisoformat(body["run_at"])
        assert run_at.utcoffset() == dt.timedelta(0)
        expected = before + dt.timedelta(seconds=7200)
        assert expected - dt.timedelta(seconds=1) <= run_at
        assert run_at <= expected + dt.timedelta(seconds=60)

    def test_run_at_hours_ahead_is_a_deferral_with_run_at_in_utc(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        spy = SpyClient(sqs)
        group = one_queue_group(spy.client, queue_url)
        paris = dt.timezone(dt.timedelta(hours=2))
        run_at = (dt.datetime.now(paris) + dt.timedelta(hours=3)).replace(microsecond=0)

        group.enqueue("jobs", "ping", {}, run_at=run_at)

        (params,) = spy.calls_to("send_message")
        assert params["DelaySeconds"] == 900
        sent = dt.datetime.fromisoformat(json.loads(params["MessageBody"])["run_at"])
        assert sent == run_at
        assert sent.utcoffset() == dt.timedelta(0)

    def test_run_at_within_fifteen_minutes_is_a_plain_delay(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        spy = SpyClient(sqs)
        group = one_queue_group(spy.client, queue_url)

        group.enqueue(
            "jobs", "ping", {}, run_at=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
        )

        (params,) = spy.calls_to("send_message")
        assert 295 <= params["DelaySeconds"] <= 300
        assert "run_at" not in json.loads(params["MessageBody"])
