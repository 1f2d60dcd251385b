"""Property-based tests of the wire format and the processor: any input has an outcome.

Bodies and attributes come from other producers, other languages and broken
servers, so the consumer side must give a defined outcome for anything:
``decode_body`` and ``decode_attributes`` never raise, and
``Processor.process`` never raises ``Exception``, whatever the message holds
and whichever SQS calls fail. The settings are deterministic (derandomized,
no example database) and fast.
"""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import datetime as dt
import json
import typing as t

import structlog.testing
from botocore.exceptions import ClientError
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.model._handlers import as_job_handler
from flask_sqs_jobs.engine.model._hooks import Hooks
from flask_sqs_jobs.engine.model._outcome import Outcome
from flask_sqs_jobs.engine.sqs import parse_run_at
from flask_sqs_jobs.engine.sqs._wire import decode_attributes
from flask_sqs_jobs.engine.sqs._wire import decode_body
from flask_sqs_jobs.engine.sqs._wire import DecodedBody
from flask_sqs_jobs.engine.sqs._wire import dump_json
from flask_sqs_jobs.engine.sqs._wire import encode_body
from flask_sqs_jobs.engine.worker._delivery import Delivery
from flask_sqs_jobs.engine.worker._heartbeat import Heartbeat
from flask_sqs_jobs.engine.worker._running import JobRunner
from flask_sqs_jobs.engine.worker._settling import Settler
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

PROPERTIES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Any character, surrogates and non-characters included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | any_text
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=20,
)
finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    """JSON (or almost JSON) nested far past the parser's recursion limit."""
    depth = draw(st.integers(1, 100_000))
    opener, closer = draw(
        st.sampled_from([("[", "]"), ('{"a":', "}"), ('{"a":[', "]}")])
    )
    tail = closer * depth if draw(st.booleans()) else ""
    return opener * depth + "1" + tail


@st.composite
def huge_body(draw: st.DrawFn) -> str:
    """A job body of up to 2 MB (past SQS's limit: a broken producer)."""
    size = draw(st.integers(0, 2_000_000))
    char = draw(st.sampled_from(["x", "é", "\u2603", "\U0001f600", '\\"']))
    return '{"job_type": "ok", "payload": {"s": "' + char * size + '"}}'


def job_shaped(job_types: st.SearchStrategy[t.Any]) -> st.SearchStrategy[str]:
    """JSON objects that look like jobs, with any value in each slot."""
    run_at = st.one_of(
        json_values,
        any_text,
        st.datetimes(timezones=st.timezones() | st.none()).map(lambda d: d.isoformat()),
    )
    return st.fixed_dictionaries(
        {"job_type": job_types, "payload": st.dictionaries(any_text, json_values)},
        optional={"run_at": run_at, "extra": json_values},
    ).map(lambda body: json.dumps(body))


bodies = st.one_of(
    any_text,
    json_values.map(json.dumps),
    job_shaped(json_values | any_text),
    deep_json(),
    huge_body(),
    st.binary(max_size=20),
    json_values,
)

string_values = st.one_of(
    any_text, json_values.map(json.dumps), deep_json(), json_values
)
attribute = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "DataType": st.sampled_from(["String", "Number", "Binary", "Custom"])
            | json_values,
            "StringValue": string_values,
            "BinaryValue": st.binary(max_size=20) | json_values,
        },
    ),
)
attribute_names = (
    st.sampled_from(["correlation_fields", "dead_letter", "traceparent", "baggage"])
    | any_text
)
message_attributes = st.one_of(
    json_values, st.dictionaries(attribute_names, attribute, max_size=6)
)


@PROPERTIES
@given(bodies)
def test_decode_body_gives_a_job_or_a_reason(body: object) -> None:
    decoded = decode_body(body)
    if isinstance(decoded, DecodedBody):
        assert isinstance(decoded.job_type, str)
        assert isinstance(decoded.payload, dict)
        assert decoded.run_at is None or isinstance(decoded.run_at, str)
    else:
        assert isinstance(decoded, str)
        assert decoded


@PROPERTIES
@given(any_text, st.dictionaries(any_text, finite_json, max_size=6))
def test_encoded_jobs_decode_to_themselves(
    job_type: str, payload: dict[str, t.Any]
) -> None:
    assert decode_body(encode_body(job_type, payload)) == DecodedBody(
        job_type, payload, None
    )


@PROPERTIES
@given(
    any_text,
    st.dictionaries(any_text, finite_json, max_size=6),
    st.none() | st.datetimes(timezones=st.just(dt.UTC)),
    st.none() | st.from_regex(r"[A-Za-z0-9_.:-]{1,128}", fullmatch=True),
)
def test_a_body_around_the_checked_payload_is_the_body_dumped_whole(
    job_type: str,
    payload: dict[str, t.Any],
    run_at: dt.datetime | None,
    job_id: str | None,
) -> None:
    """Reusing the payload's JSON from the enqueue checks changes no byte of the body
    (surrogates and characters SQS refuses included)."""
    whole = encode_body(job_type, payload, run_at, job_id)
    joined = encode_body(
        job_type, payload, run_at, job_id, payload_json=dump_json(payload)
    )
    assert joined == whole


@PROPERTIES
@given(message_attributes)
def test_decode_attributes_skips_whatever_is_malformed(attributes: object) -> None:
    correlation_fields, trace_headers = decode_attributes(attributes)
    assert isinstance(correlation_fields, dict)
    assert all(isinstance(value, str) for value in trace_headers.values())
    assert not {"correlation_fields", "dead_letter"} & set(trace_headers)


@PROPERTIES
@given(
    any_text
    | st.datetimes(timezones=st.timezones() | st.none()).map(lambda d: d.isoformat())
)
def test_run_at_is_an_aware_utc_datetime_or_none(value: str) -> None:
    parsed = parse_run_at(value)
    if parsed is not None:
        assert parsed.utcoffset() == dt.timedelta(0)


# -- the processor ------------------------------------------------------------------


class FakeClient:
    """Just enough of a boto3 SQS client; the operations in ``failing`` raise."""

    def __init__(self, failing: cabc.Set[str], attributes: dict[str, str]) -> None:
        self.failing = failing
        self.attributes = attributes

    def _call(self, name: str, result: dict[str, t.Any]) -> dict[str, t.Any]:
        if name in self.failing:
            raise ClientError({"Error": {"Code": "InternalError"}}, name)
        return result

    def get_queue_attributes(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("get_queue_attributes", {"Attributes": self.attributes})

    def get_queue_url(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("get_queue_url", {"QueueUrl": "https://sqs.test/1/dlq"})

    def send_message(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("send_message", {"MessageId": "new"})

    def delete_message(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("delete_message", {})

    def change_message_visibility(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("change_message_visibility", {})

    def change_message_visibility_batch(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("change_message_visibility_batch", {"Failed": []})

    def delete_message_batch(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return self._call("delete_message_batch", {"Failed": []})


def _ok(payload: dict[str, t.Any]) -> None:
    pass


def _fail(payload: dict[str, t.Any]) -> None:
    raise RuntimeError("the handler failed")


def _non_retryable(payload: dict[str, t.Any]) -> None:
    raise NonRetryableError("no retry can fix this")


def _retry(payload: dict[str, t.Any]) -> None:
    raise RetryJob(delay_seconds=5)


HANDLERS = {
    "ok": _ok,
    "fail": _fail,
    "non_retryable": _non_retryable,
    "retry": _retry,
}
OPERATIONS = [
    "get_queue_attributes",
    "get_queue_url",
    "send_message",
    "delete_message",
    "change_message_visibility",
]
system_attribute_names = (
    st.sampled_from(["ApproximateReceiveCount", "SentTimestamp", "MessageGroupId"])
    | any_text
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "MessageId": json_values,
        "ReceiptHandle": json_values,
        "Body": bodies | job_shaped(st.sampled_from([*HANDLERS, "unknown"])),
        "Attributes": json_values
        | st.dictionaries(system_attribute_names, json_values | any_text, max_size=4),
        "MessageAttributes": message_attributes,
    },
)
queue_attributes = st.fixed_dictionaries(
    {},
    optional={
        "VisibilityTimeout": st.sampled_from(["30", "0", "x"]),
        "RedrivePolicy": st.sampled_from(
            [
                '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:1:dlq",'
                ' "maxReceiveCount": 2}',
                '{"maxReceiveCount": "many"}',
                "not json",
            ]
        ),
    },
)


@PROPERTIES
@given(
    messages,
    st.sets(st.sampled_from(OPERATIONS)),
    queue_attributes,
    st.sampled_from([0, 30]),
    st.booleans(),
)
def test_process_never_raises(
    message: dict[str, t.Any],
    failing: set[str],
    attributes: dict[str, str],
    visibility_timeout: int,
    fifo: bool,
) -> None:
    client = t.cast("SQSClient", FakeClient(failing, attributes))
    url = "https://sqs.test/1/jobs" + (".fifo" if fifo else "")
    queue = SqsQueue(url, boto_client=client, visibility_timeout=visibility_timeout)
    heartbeat = Heartbeat()
    handlers = {k: as_job_handler(v) for k, v in HANDLERS.items()}
    runner = JobRunner(handlers, (), heartbeat, Hooks())
    settler = Settler(heartbeat, Hooks(), lambda: sorted(handlers))
    lease = heartbeat.hold(
        queue,
        "jobs",
        str(message.get("ReceiptHandle", "")),
        str(message.get("MessageId", "")),
        0.0,
    )
    delivery = Delivery("jobs", queue, message, lease)

    def process() -> Outcome | None:
        ran = runner.run(delivery)
        try:
            return settler.settle(ran)
        finally:
            ran.close()

    with structlog.testing.capture_logs():
        outcome = contextvars.copy_context().run(process)
    assert outcome is None or isinstance(outcome, Outcome)
    assert not heartbeat.held(), "the processor left the message's lease tracked"
