"""Characters that hide or reorder text (bidi overrides, zero-width characters,
line separators, ...) are escaped wherever message text is shown: the whole
class, on log lines as on any other surface (``escape``)."""

from __future__ import annotations

import re
import sys
import typing as t
import unicodedata

import pytest
from flask_sqs_jobs.engine.model.untrusted._text import escape
from flask_sqs_jobs.engine.model.untrusted._text import loggable_text

from tests.engine.helpers import events
from tests.engine.test_untrusted_logging import run_jobs
from tests.engine.test_untrusted_logging import send

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

#: Unicode categories whose every character is escaped.
ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_every_character_of_the_escaped_categories_is_escaped_readably() -> None:
    missed = []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) not in ESCAPED_CATEGORIES:
            continue
        shown = escape(f"a{char}b")
        if shown != f"a{ascii(char)[1:-1]}b":
            missed.append(hex(code))
    assert missed == []


@pytest.mark.parametrize(
    "text",
    [
        "café ☕ 日本語 Ελληνικά עברית العربية हिन्दी",
        "e\u0301 (a combining accent)",
        "non\u00a0breaking and ideographic\u3000spaces",
        "emoji 👍🏽 and flags 🇫🇷",
        "math ∑ x² ≤ ∞",
    ],
)
def test_letters_marks_symbols_and_spaces_of_any_script_stay(text: str) -> None:
    assert escape(text) == text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("invoice\u202efdp.exe", "invoice\\u202efdp.exe"),
        ("ad\u200bmin", "ad\\u200bmin"),
        ("one\u2028two\u2029three", "one\\u2028two\\u2029three"),
        ("\ufeffbom", "\\ufeffbom"),
        ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),
        ("soft\u00adhyphen", "soft\\xadhyphen"),
    ],
)
def test_escaped_as_python_writes_them(raw: str, shown: str) -> None:
    assert escape(raw) == shown
    assert loggable_text(raw) == shown


def test_a_job_type_that_reorders_text_reaches_the_log_escaped(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    ran: list[t.Any] = []
    job_type = "refund\u202e\u2066\u200bmid\u2028"
    send(sqs, queue_url, job_type, {"request_id": "r\u202e1"})

    run_jobs(sqs, queue_url, {job_type: ran.append})

    assert ran == [{}]
    finished = events(logs, "job_finished")
    assert [e["job_type"] for e in finished] == [
        "refund\\u202e\\u2066\\u200bmid\\u2028"
    ]
    assert [e["request_id"] for e in finished] == ["r\\u202e1"]
    values = [v for event in logs for v in event.values() if isinstance(v, str)]
    assert [v for v in values if not v.isprintable()] == []


@pytest.mark.usefixtures("structlog_defaults")
def test_the_rendered_log_line_holds_no_invisible_character(
    sqs: SQSClient, queue_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    send(sqs, queue_url, "ping\u202egnp", run_at="x\u2028y")

    run_jobs(sqs, queue_url, {}, cycles=1)

    out = _SGR.sub("", capsys.readouterr().out)
    assert "job_type=ping\\u202egnp" in out
    assert "unknown_job_type_deferred" in out
    hidden = {c for c in out if not c.isprintable() and c != "\n"}
    assert hidden == set()


@pytest.fixture
def structlog_defaults() -> t.Iterator[None]:
    import structlog

    config = structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.configure(**config)
