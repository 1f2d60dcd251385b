"""``flask sqs-jobs dlq list|redrive`` against hostile dead letters: a dead-letter
queue shared by two queues, values nested too deep, invisible characters, and a
dead-letter queue with a redrive policy of its own."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs

from tests.support import create_queue
from tests.support import message_count
from tests.support import queue_arn
from tests.support import SourceArnClient
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

    from tests.conftest import MakeApp


@pytest.fixture(autouse=True)
def _quiet_logs(log_events: list[EventDict]) -> None:
    """Capture log lines, so a command's output is only what it prints itself."""


@pytest.fixture
def queue_urls(sqs: SQSClient) -> dict[str, str]:
    """``default`` and ``billing`` share one dead-letter queue; ``chained``'s has a
    redrive policy of its own."""
    shared = create_queue(sqs, "app-shared-dlq")
    last = create_queue(sqs, "app-last-resort")
    chained_dlq = create_queue(
        sqs, "app-chained-dlq", dead_letter_url=last, max_receive_count=3
    )
    return {
        "default": create_queue(
            sqs, "app-default", dead_letter_url=shared, max_receive_count=100
        ),
        "billing": create_queue(
            sqs, "app-billing", dead_letter_url=shared, max_receive_count=100
        ),
        "shared-dlq": shared,
        "chained": create_queue(
            sqs, "app-chained", dead_letter_url=chained_dlq, max_receive_count=100
        ),
        "chained-dlq": chained_dlq,
        "last-resort": last,
    }


@pytest.fixture
def app_config() -> dict[str, t.Any]:
    return {
        "SQS_JOBS_QUEUES": {
            "default": {"name": "app-default"},
            "billing": {"name": "app-billing"},
            "chained": {"name": "app-chained"},
        }
    }


def letter(
    sqs: SQSClient,
    url: str,
    n: int,
    *,
    source: str | None = "default",
    job_type: str = "boom",
    reason_text: str | None = None,
    body: str | None = None,
) -> str:
    """Put a dead letter on ``url`` as the worker of queue ``source`` would."""
    reason = {
        "error_type": "KeyError",
        "error": "'user 42 not found'",
        "failed_at": "2026-11-30T06:22:55.737Z",
        "source_queue": source,
        "receive_count": 2,
    }
    attributes: dict[str, t.Any] = {}
    if source is not None or reason_text is not None:
        text = json.dumps(reason) if reason_text is None else reason_text
        attributes["dead_letter"] = {"DataType": "String", "StringValue": text}
    response = sqs.send_message(
        QueueUrl=url,
        MessageBody=body or json.dumps({"job_type": job_type, "payload": {"n": n}}),
        MessageAttributes=attributes,
    )
    return response["MessageId"]


def ns(sqs: SQSClient, url: str) -> list[int]:
    return sorted(
        json.loads(m["Body"])["payload"]["n"] for m in visible_messages(sqs, url)
    )


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.stdout


# -- a shared dead-letter queue --


def test_redrive_sends_only_this_queues_letters_and_names_the_others(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    shared = queue_urls["shared-dlq"]
    for n in (0, 1):
        letter(sqs, shared, n)
    for n in (10, 11, 12):
        letter(sqs, shared, n, source="billing")
    letter(sqs, shared, 20, source="another-app-queue")

    result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"])

    assert ok(result).splitlines() == [
        "moved 2 dead letter(s) back to 'default'; 4 left",
        "left 4 dead letter(s) that record another source queue: another-app-queue"
        " (1), billing (3); redrive them to their own queue (flask sqs-jobs dlq"
        " redrive THAT_QUEUE), or pass --any-source to send them to 'default'",
    ]
    assert ns(sqs, queue_urls["default"]) == [0, 1]
    assert ns(sqs, queue_urls["billing"]) == []
    assert ns(sqs, shared) == [10, 11, 12, 20]
    again = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "billing"])
    assert ok(again).splitlines()[0] == (
        "moved 3 dead letter(s) back to 'billing'; 1 left"
    )
    assert ns(sqs, queue_urls["billing"]) == [10, 11, 12]


def test_redrive_with_a_job_type_and_a_limit_still_checks_the_source(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    shared = queue_urls["shared-dlq"]
    letter(sqs, shared, 0, source="billing", job_type="charge")
    letter(sqs, shared, 1, job_type="charge")
    letter(sqs, shared, 2, job_type="charge")

    result = runner.invoke(
        args=[
            "sqs-jobs",
            "dlq",
            "redrive",
            "default",
            "--job-type",
            "charge",
            "--limit",
            "5",
        ]
    )

    assert ok(result).startswith("moved 2 dead letter(s) back to 'default'; 1 left\n")
    assert ns(sqs, queue_urls["default"]) == [1, 2]
    assert ns(sqs, shared) == [0]


def test_any_source_sends_every_letter_to_the_queue_named(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    shared = queue_urls["shared-dlq"]
    letter(sqs, shared, 0)
    letter(sqs, shared, 1, source="renamed-queue")

    result = runner.invoke(
        args=["sqs-jobs", "dlq", "redrive", "default", "--any-source"]
    )

    assert ok(result) == "moved 2 dead letter(s) back to 'default'; 0 left\n"
    assert ns(sqs, queue_urls["default"]) == [0, 1]


def test_redrive_follows_deadletterqueuesourcearn(
    make_app: MakeApp, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    """SQS's record of the source wins over the worker's attribute."""
    shared = queue_urls["shared-dlq"]
    by_sqs = letter(sqs, shared, 0, source=None)
    contradicted = letter(sqs, shared, 1)
    arns = {
        by_sqs: queue_arn(sqs, queue_urls["billing"]),
        contradicted: queue_arn(sqs, queue_urls["billing"]),
    }
    wrapped = t.cast(t.Any, SourceArnClient(sqs, arns))
    app = make_app(extension=SQSJobs(boto_client=wrapped))

    result = app.test_cli_runner().invoke(
        args=["sqs-jobs", "dlq", "redrive", "default"]
    )

    assert "app-billing (2)" in ok(result)
    assert message_count(sqs, queue_urls["default"]) == 0
    moved = app.test_cli_runner().invoke(args=["sqs-jobs", "dlq", "redrive", "billing"])
    assert ok(moved).startswith("moved 2 dead letter(s) back to 'billing'")
    assert ns(sqs, queue_urls["billing"]) == [0, 1]


def test_a_recorded_source_is_printed_escaped(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    letter(sqs, queue_urls["shared-dlq"], 0, source="evil\x1b[2J\u202eqa")

    output = ok(runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"]))

    assert "evil\\x1b[2J\\u202eqa (1)" in output
    assert "\x1b" not in output
    assert "\u202e" not in output


# -- values nested too deep --

DEPTHS = [900, 5000, 100_000]


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", DEPTHS)
def test_dlq_list_shows_a_too_deep_reason_as_unreadable(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str], depth: int
) -> None:
    dlq = queue_urls["shared-dlq"]
    message_id = letter(sqs, dlq, 0, reason_text=deep(depth))

    text = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default"]))
    as_json = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"]))

    assert text.splitlines() == [
        f"{message_id}  job_type=boom",
        "  reason: unreadable: the dead_letter attribute is nested more than 100"
        " levels deep",
        '  payload: {"n": 0}',
    ]
    [shown] = json.loads(as_json)["dead_letters"]
    assert shown["dead_letter"] == {
        "unreadable": "the dead_letter attribute is nested more than 100 levels deep"
    }
    assert message_count(sqs, dlq) == 1


@pytest.mark.parametrize("depth", [300, *DEPTHS])
def test_dlq_list_shows_a_too_deep_payload_without_crashing(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str], depth: int
) -> None:
    body = '{"job_type": "boom", "payload": {"a": ' + deep(depth) + "}}"
    letter(sqs, queue_urls["shared-dlq"], 0, body=body)

    text = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default"]))
    as_json = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"]))

    [shown] = json.loads(as_json)["dead_letters"]
    if shown["payload"] is not None:
        assert shown["payload"] == {
            "unreadable": "the payload is nested more than 100 levels deep"
        }
        assert '  payload: {"unreadable": "the payload is nested more than 100' in text
    else:
        # Too deep for Python to decode: the body is shown as text.
        assert depth > 300
        assert shown["body"] == body
        assert "  body (not a job): " in text


@pytest.mark.parametrize("depth", DEPTHS)
def test_dlq_redrive_by_job_type_moves_letters_nested_too_deep(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str], depth: int
) -> None:
    dlq = queue_urls["shared-dlq"]
    letter(sqs, dlq, 0, reason_text=deep(depth))
    letter(sqs, dlq, 1, job_type="other", reason_text=deep(depth))

    result = runner.invoke(
        args=["sqs-jobs", "dlq", "redrive", "default", "--job-type", "boom"]
    )

    assert ok(result) == "moved 1 dead letter(s) back to 'default'; 1 left\n"
    assert ns(sqs, queue_urls["default"]) == [0]


# -- invisible and reordering characters --


@pytest.mark.parametrize(
    "char",
    [
        "\u202e",
        "\u2066",
        "\u200b",
        "\u200d",
        "\ufeff",
        "\u2028",
        "\u2029",
        "\U000e0041",
    ],
)
def test_dlq_list_escapes_invisible_and_reordering_characters(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str], char: str
) -> None:
    escaped = ascii(char)[1:-1]
    text = f"invoice{char}fdp.exe"
    reason = json.dumps(
        {
            "error_type": text,
            "error": text,
            "failed_at": text,
            "source_queue": "default",
            "receive_count": text,
        }
    )
    dlq = queue_urls["shared-dlq"]
    letter(sqs, dlq, 0, job_type=text, reason_text=reason)
    sqs.send_message(QueueUrl=dlq, MessageBody=f"not a job {text}")

    output = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default"]))
    as_json = ok(runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"]))

    assert char not in output
    assert output.count(f"invoice{escaped}fdp.exe") == 6
    assert as_json.isascii()
    assert {x["job_type"] for x in json.loads(as_json)["dead_letters"]} == {text, None}


# -- a dead-letter queue with a redrive policy of its own --


def test_dlq_list_warns_that_listing_a_chained_dead_letter_queue_counts(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    letter(sqs, queue_urls["chained-dlq"], 0, source="chained")

    result = runner.invoke(args=["sqs-jobs", "dlq", "list", "chained"])

    assert result.exit_code == 0
    assert result.stderr == (
        "warning: the dead-letter queue app-chained-dlq has a RedrivePolicy of its"
        " own: listing counts as a receive, and SQS moves a letter received 3 times"
        " on to app-last-resort at the next one\n"
    )
    assert "job_type=boom" in result.stdout
    assert message_count(sqs, queue_urls["last-resort"]) == 0
