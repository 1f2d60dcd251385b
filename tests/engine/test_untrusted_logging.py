"""What a message can put on a worker's log lines: bounded, escaped, never a crash."""

from __future__ import annotations

import collections.abc as cabc
import json
import re
import typing as t
import uuid

import pytest
import structlog
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs.engine.model._log_keys import RESERVED_LOG_KEYS
from flask_sqs_jobs.engine.model.untrusted import _text as _untrusted
from flask_sqs_jobs.engine.model.untrusted._text import escape
from flask_sqs_jobs.engine.model.untrusted._text import FieldNames
from flask_sqs_jobs.engine.model.untrusted._text import loggable_text
from flask_sqs_jobs.engine.model.untrusted._text import MAX_CORRELATION_FIELDS
from flask_sqs_jobs.engine.model.untrusted._text import MAX_LOGGED_TEXT
from flask_sqs_jobs.engine.model.untrusted._text import trim_correlation_fields
from flask_sqs_jobs.engine.model.untrusted._text import TRUNCATION_MARK
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

# An OSC sequence setting the terminal title, and one clearing the screen.
ANSI = "\x1b]0;pwned\x07\x1b[2J"
ANSI_ESCAPED = "\\x1b]0;pwned\\x07\\x1b[2J"
SURROGATE = "\ud800"
# The colours ConsoleRenderer adds itself.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def send(
    sqs: SQSClient,
    url: str,
    job_type: str,
    correlation_fields: dict[str, t.Any] | None = None,
    **body: t.Any,
) -> None:
    """Send a job as any producer could, escaping what SQS does not accept raw."""
    attributes: dict[str, t.Any] = {}
    if correlation_fields is not None:
        attributes["correlation_fields"] = {
            "DataType": "String",
            "StringValue": json.dumps(correlation_fields),
        }
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"job_type": job_type, "payload": {}, **body}),
        MessageAttributes=attributes,
    )


def run_jobs(
    sqs: SQSClient, url: str, handlers: dict[str, t.Any], cycles: int = 1
) -> int:
    group = one_queue_group(sqs, url, visibility_timeout=0)
    return JobWorker(group, handlers, stop_after(cycles), idle_wait_seconds=0).run()


@pytest.fixture
def structlog_defaults() -> cabc.Iterator[None]:
    """structlog as in an application that never configures it: printing to stdout."""
    config = structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.configure(**config)


# -- escaping --


@given(st.text())
def test_escaped_text_is_valid_utf8_without_controls(text: str) -> None:
    escaped = escape(text)

    escaped.encode("utf-8")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in escaped)


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("\x1b[31mred", "\\x1b[31mred"),
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),
        ("\ud800 \udfff", "\\ud800 \\udfff"),
        ("café ☕ 日本", "café ☕ 日本"),
    ],
)
def test_escape_keeps_text_readable(raw: str, escaped: str) -> None:
    assert escape(raw) == escaped


def test_long_text_is_cut_and_marked() -> None:
    text = "é" * (MAX_LOGGED_TEXT + 1)

    assert loggable_text(text) == "é" * MAX_LOGGED_TEXT + TRUNCATION_MARK
    assert loggable_text(text[:-1]) == text[:-1]


# -- bounding correlation fields --


def test_trimming_drops_each_kind_of_bad_field_and_counts_it() -> None:
    fields: dict[str, object] = {
        "request_id": "r-1",
        "outcome": "forged",
        "_record": "forged",
        "bad key": 1,
        "k" * 65: 1,
        "nested": {"a": 1},
        "list": [1],
        "long": "x" * 1000,
        "big": 10**30,
        "flag": True,
        "ratio": 0.5,
        "none": None,
    }

    trimmed = trim_correlation_fields(fields, RESERVED_LOG_KEYS, FieldNames())

    assert trimmed.fields == {
        "request_id": "r-1",
        "long": "x" * MAX_LOGGED_TEXT + TRUNCATION_MARK,
        "big": str(10**30),
        "flag": True,
        "ratio": 0.5,
        "none": None,
    }
    assert trimmed.counts() == {
        "kept": 6,
        "reserved": 2,
        "invalid_names": 2,
        "invalid_values": 2,
        "truncated": 1,
    }


def test_a_process_binds_a_bounded_number_of_distinct_names() -> None:
    names = FieldNames(limit=20)
    first = trim_correlation_fields({f"a{i}": i for i in range(10)}, (), names)
    second = trim_correlation_fields({f"b{i}": i for i in range(16)}, (), names)
    again = trim_correlation_fields({"a1": 1, "b9": 9, "c0": 0}, (), names)

    assert len(first.fields) == 10
    assert list(second.fields) == [f"b{i}" for i in range(10)]
    assert second.counts() == {"kept": 10, "unknown_names": 6}
    assert again.fields == {"a1": 1, "b9": 9}


def test_a_message_with_ten_thousand_fields_binds_at_most_the_limit(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    contexts: list[dict[str, t.Any]] = []
    send(sqs, queue_url, "ping", {f"{prefix}{i}": i for i in range(10_000)})
    before = set(structlog.contextvars._CONTEXT_VARS)

    def handler(payload: Payload) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    run_jobs(sqs, queue_url, {"ping": handler})

    new = set(structlog.contextvars._CONTEXT_VARS) - before
    ours = {name for name in new if prefix in name}
    assert len(ours) == MAX_CORRELATION_FIELDS
    assert new - ours <= {f"structlog_{key}" for key in RESERVED_LOG_KEYS}
    (context,) = contexts
    assert {k for k in context if k.startswith(prefix)} == {
        f"{prefix}{i}" for i in range(MAX_CORRELATION_FIELDS)
    }
    assert only_event(logs, "job_finished")["outcome"] == "success"
    warning = only_event(logs, "correlation_fields_trimmed")
    assert warning["log_level"] == "warning"
    assert warning["kept"] == MAX_CORRELATION_FIELDS
    assert warning["over_limit"] == 10_000 - MAX_CORRELATION_FIELDS
    assert prefix not in repr({k: v for k, v in warning.items() if k not in context})


FORGED = {
    key: "forged"
    for key in (
        "outcome",
        "error_type",
        "exception",
        "exc_info",
        "stack_info",
        "duration_ms",
        "processing_outcome",
        "error",
        "reason",
        "retry_in_seconds",
        "queue_wait_ms",
        "group_id",
        "job_id",
    )
}


@pytest.mark.parametrize("fails", [False, True], ids=["success", "failure"])
def test_forged_engine_keys_never_reach_the_job_lines(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], fails: bool
) -> None:
    send(sqs, queue_url, "ping", {**FORGED, "request_id": "r-1"})

    def handler(payload: Payload) -> None:
        structlog.get_logger("app").info("charging")
        if fails:
            raise RuntimeError("declined")

    run_jobs(sqs, queue_url, {"ping": handler})

    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == ("retry" if fails else "success")
    assert finished["request_id"] == "r-1"
    for line in (
        finished,
        only_event(logs, "job_started"),
        only_event(logs, "charging"),
    ):
        assert "forged" not in repr(line)
        assert "exception" not in line
        assert "stack_info" not in line
    if fails:
        assert finished["error_type"] == "RuntimeError"
    else:
        assert "error_type" not in finished
        assert "exc_info" not in finished
    assert only_event(logs, "correlation_fields_trimmed")["reserved"] == len(FORGED)


def test_a_reserved_field_is_still_available_to_the_handler(
    sqs: SQSClient, queue_url: str
) -> None:
    seen: list[dict[str, t.Any]] = []
    send(sqs, queue_url, "ping", {"outcome": "forged", "x": "\x1b"})

    def handler(payload: Payload) -> None:
        seen.append(dict(current_job.correlation_fields))

    run_jobs(sqs, queue_url, {"ping": handler})

    assert seen == [{"outcome": "forged", "x": "\x1b"}]


# -- a job never fails because of what it logs --


@pytest.mark.usefixtures("structlog_defaults")
def test_surrogates_and_escape_sequences_never_stop_a_job(
    sqs: SQSClient, queue_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[Payload] = []
    # No spaces: ConsoleRenderer would repr() the value and escape it itself.
    hostile = f"r-1{SURROGATE}{ANSI}"
    send(
        sqs,
        queue_url,
        "ping",
        {"request_id": hostile, f"x{ANSI}": 1, "long": hostile * 100},
        run_at=hostile,
    )
    send(sqs, queue_url, f"ping{SURROGATE}{ANSI}")

    run_jobs(sqs, queue_url, {"ping": ran.append}, cycles=2)

    assert ran == [{}]
    out = capsys.readouterr().out
    plain = _SGR.sub("", out)
    assert "\x1b" not in plain
    assert "\x07" not in plain
    assert f"request_id=r-1\\ud800{ANSI_ESCAPED} " in plain
    assert f"job_type=ping\\ud800{ANSI_ESCAPED}" in plain
    assert "run_at_invalid" in plain
    assert "unknown_job_type_deferred" in plain
    assert "outcome=success" in plain
    assert "invalid_names=1" in plain


def test_the_process_wide_name_limit_applies_to_jobs(
    sqs: SQSClient,
    queue_url: str,
    logs: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = FieldNames(limit=2)
    monkeypatch.setattr(_untrusted, "FIELD_NAMES", names)
    send(sqs, queue_url, "ping", {"a": 1, "b": 2})
    send(sqs, queue_url, "ping", {"c": 3, "a": 4})

    run_jobs(sqs, queue_url, {"ping": lambda p: None}, cycles=2)

    finished = events(logs, "job_finished")
    assert sorted((e.get("a"), e.get("b"), e.get("c")) for e in finished) == [
        (1, 2, None),
        (4, None, None),
    ]
    assert only_event(logs, "correlation_fields_trimmed")["unknown_names"] == 1
