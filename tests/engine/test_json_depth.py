"""One nesting bound for payloads, at enqueue and in the worker, whatever the
interpreter's recursion limit."""

from __future__ import annotations

import json
import sys
import typing as t

import pytest
from flask_sqs_jobs.engine.producing._checks import check_correlation_fields
from flask_sqs_jobs.engine.producing._checks import check_payload
from flask_sqs_jobs.engine.sqs._result_json import read_result
from flask_sqs_jobs.engine.sqs._result_json import result_json
from flask_sqs_jobs.engine.sqs._result_json import ResultNotKept
from flask_sqs_jobs.engine.sqs._wire import BODY_TOO_DEEP
from flask_sqs_jobs.engine.sqs._wire import decode_attributes
from flask_sqs_jobs.engine.sqs._wire import decode_body
from flask_sqs_jobs.engine.sqs._wire import DecodedBody
from flask_sqs_jobs.engine.sqs._wire import encode_body
from flask_sqs_jobs.engine.sqs._wire import MAX_JSON_DEPTH
from flask_sqs_jobs.engine.sqs._wire import nested_deeper_than


def payload_of_depth(levels: int) -> dict[str, t.Any]:
    """A payload nesting ``levels`` objects and arrays, itself included."""
    value: t.Any = "bottom"
    for i in range(levels - 1):
        value = [value] if i % 2 else {"k": value}
    return {"top": value}


def body_of_depth(levels: int) -> str:
    """A body whose payload nests ``levels`` deep, written without recursion."""
    inner = '{"a":' * (levels - 1) + '"x"' + "}" * (levels - 1)
    return '{"job_type":"t","payload":{"p":' + inner + "}}"


@pytest.fixture(params=[1000, 100_000])
def recursion_limit(request: pytest.FixtureRequest) -> t.Iterator[int]:
    """Python's default limit, and one raised as some applications do."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(request.param)
    yield request.param
    sys.setrecursionlimit(before)


def test_the_bound_is_512_levels() -> None:
    assert MAX_JSON_DEPTH == 512


def test_a_payload_at_the_bound_is_sent_and_decoded(recursion_limit: int) -> None:
    payload = check_payload(payload_of_depth(MAX_JSON_DEPTH))
    decoded = decode_body(encode_body("t", payload))
    assert isinstance(decoded, DecodedBody)
    assert decoded.payload == payload


def test_a_body_one_level_deeper_is_malformed_whatever_the_recursion_limit(
    recursion_limit: int,
) -> None:
    assert isinstance(decode_body(body_of_depth(MAX_JSON_DEPTH)), DecodedBody)
    for levels in (MAX_JSON_DEPTH + 1, 985, 1500, 200_000):
        assert decode_body(body_of_depth(levels)) == BODY_TOO_DEEP
    assert BODY_TOO_DEEP == "body is nested more than 513 levels deep"


def test_enqueue_refuses_a_payload_one_level_deeper_naming_the_bound() -> None:
    for levels in (MAX_JSON_DEPTH + 1, 5000):
        with pytest.raises(
            ValueError, match="payload is nested too deeply: more than 512 levels"
        ):
            check_payload(payload_of_depth(levels))
    with pytest.raises(
        ValueError, match="correlation_fields is nested too deeply: more than 512"
    ):
        check_correlation_fields(payload_of_depth(MAX_JSON_DEPTH + 1))


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"s": "[" * 10_000 + '\\"{' * 600, "t": ["]" * 3]})
    assert not nested_deeper_than(text, 2)
    assert nested_deeper_than(text, 1)
    assert isinstance(
        decode_body(json.dumps({"job_type": "t", "payload": {"s": "{" * 2000}})),
        DecodedBody,
    )


def test_correlation_fields_nested_too_deeply_are_ignored() -> None:
    deep = '{"a":' * 600 + "1" + "}" * 600
    attributes = {"correlation_fields": {"DataType": "String", "StringValue": deep}}
    assert decode_attributes(attributes) == ({}, {})


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({1, 2}, "not JSON"),
        (float("nan"), "not JSON"),
        (payload_of_depth(MAX_JSON_DEPTH + 1), "nested more than 512 levels deep"),
        ("x" * 65_535, "its JSON is 65,537 bytes, larger than the 65,536 kept"),
    ],
)
def test_a_result_that_cannot_be_kept_says_why(result: object, reason: str) -> None:
    with pytest.raises(ResultNotKept, match=reason):
        result_json(result)


def test_a_result_deeper_than_the_interpreter_can_encode_is_refused_too() -> None:
    value: t.Any = 1
    for _ in range(sys.getrecursionlimit() + 500):
        value = [value]
    with pytest.raises(ResultNotKept, match="nested more than 512 levels deep"):
        result_json(value)


def test_a_kept_result_reads_back_and_a_foreign_one_reads_as_none() -> None:
    assert read_result(result_json({"n": "café \ud800"})) == {"n": "café \ud800"}
    assert read_result("[" * 2000 + "]" * 2000) is None
    assert read_result("not json") is None
    assert read_result(None) is None
