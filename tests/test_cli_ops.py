"""The operator commands ``flask sqs-jobs stats|dlq|enqueue``, and ``enqueue_many``
through the extension, against moto in this process."""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import socket
import typing as t

import pytest
import structlog
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.flask_helpers import sent_jobs
from tests.flask_helpers import SentJob
from tests.support import create_queue
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture(autouse=True)
def _quiet_logs(log_events: list[EventDict]) -> None:
    """Capture log lines, so a command's output is only what it prints itself."""


@pytest.fixture
def queue_urls(sqs: SQSClient) -> dict[str, str]:
    """``default`` has a dead-letter queue; ``critical`` has none.

    The receive count is high enough that the tests' own peeking at a queue
    never makes SQS move a message.
    """
    dlq = create_queue(sqs, "app-default-dlq")
    return {
        "default": create_queue(
            sqs,
            "app-default",
            visibility_timeout=30,
            dead_letter_url=dlq,
            max_receive_count=100,
        ),
        "default-dlq": dlq,
        "critical": create_queue(sqs, "app-critical", visibility_timeout=30),
    }


@pytest.fixture
def ran(jobs: SQSJobs) -> list[Payload]:
    payloads: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        payloads.append(payload)

    return payloads


def error_line(result: Result, exit_code: int) -> str:
    """The one ``Error: ...`` line a failed command prints: no usage, no traceback."""
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.exception
    )
    assert "Usage:" not in result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    return result.stdout


def dead_letter(
    sqs: SQSClient,
    dlq_url: str,
    job_type: str,
    payload: Payload,
    *,
    reason: Payload | None = None,
    correlation_fields: Payload | None = None,
) -> str:
    """Put a dead letter on ``dlq_url`` in the shape the worker gives one."""
    attributes: dict[str, t.Any] = {}
    if correlation_fields is not None:
        attributes["correlation_fields"] = {
            "DataType": "String",
            "StringValue": json.dumps(correlation_fields),
        }
    if reason is not None:
        attributes["dead_letter"] = {
            "DataType": "String",
            "StringValue": json.dumps(reason),
        }
    response = sqs.send_message(
        QueueUrl=dlq_url,
        MessageBody=json.dumps({"job_type": job_type, "payload": payload}),
        MessageAttributes=attributes,
    )
    return response["MessageId"]


def counts(sqs: SQSClient, url: str) -> tuple[int, int, int]:
    """(visible, in flight, delayed) messages on a queue."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        int(attributes["ApproximateNumberOfMessagesDelayed"]),
    )


REASON = {
    "error_type": "KeyError",
    "error": "'user 42 not found'",
    "failed_at": "2026-11-30T06:22:55.737Z",
    "source_queue": "default",
    "receive_count": 2,
}


# -- stats ------------------------------------------------------------------------


@pytest.fixture
def busy_queues(sqs: SQSClient, queue_urls: dict[str, str]) -> None:
    """``default``: 2 visible, 1 in flight, 1 delayed; its DLQ: 1 dead letter."""
    for n in range(4):
        sqs.send_message(QueueUrl=queue_urls["default"], MessageBody=f'{{"n": {n}}}')
    sqs.receive_message(
        QueueUrl=queue_urls["default"], MaxNumberOfMessages=1, VisibilityTimeout=60
    )
    sqs.send_message(QueueUrl=queue_urls["default"], MessageBody="{}", DelaySeconds=60)
    sqs.receive_message(
        QueueUrl=queue_urls["default"], MaxNumberOfMessages=1, VisibilityTimeout=60
    )
    dead_letter(sqs, queue_urls["default-dlq"], "record", {}, reason=REASON)


@pytest.mark.usefixtures("busy_queues")
def test_stats_shows_a_table_of_each_queue_and_its_dead_letters(
    runner: FlaskCliRunner,
) -> None:
    result = runner.invoke(args=["sqs-jobs", "stats"])

    assert ok(result).splitlines() == [
        "QUEUE                     VISIBLE  IN FLIGHT  DELAYED",
        "default                         2          2        1",
        "  default (dead letters)        1          0        0",
        "critical                        0          0        0",
    ]


@pytest.mark.usefixtures("busy_queues")
def test_stats_json_gives_the_same_numbers_and_the_urls(
    runner: FlaskCliRunner, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(args=["sqs-jobs", "stats", "--json"])

    assert json.loads(ok(result)) == {
        "queues": [
            {
                "queue": "default",
                "url": queue_urls["default"],
                "visible": 2,
                "in_flight": 2,
                "delayed": 1,
                "dead_letter": {
                    "url": queue_urls["default-dlq"],
                    "visible": 1,
                    "in_flight": 0,
                    "delayed": 0,
                },
            },
            {
                "queue": "critical",
                "url": queue_urls["critical"],
                "visible": 0,
                "in_flight": 0,
                "delayed": 0,
                "dead_letter": None,
            },
        ]
    }


def test_stats_of_a_queue_missing_from_sqs_exits_2_naming_it(
    make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    queues = {**app_config["SQS_JOBS_QUEUES"], "reports": {"name": "app-reports"}}
    app = make_app({**app_config, "SQS_JOBS_QUEUES": queues})

    result = app.test_cli_runner().invoke(args=["sqs-jobs", "stats"])

    assert error_line(result, 2).startswith(
        "Error: queue 'reports': SQS has no queue named 'app-reports'."
    )


# -- dlq list -----------------------------------------------------------------------


def listed(output: str) -> dict[str, list[str]]:
    """``dlq list`` output: message id -> the lines about that dead letter."""
    entries: dict[str, list[str]] = {}
    current: list[str] = []
    for line in output.splitlines():
        if line.startswith("  "):
            current.append(line)
        else:
            message_id, _ = line.split("  ", 1)
            current = entries[message_id] = [line]
    return entries


def test_dlq_list_shows_each_dead_letter_with_its_reason_and_keeps_it(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    with_reason = dead_letter(sqs, dlq, "boom", {"user_id": 42}, reason=REASON)
    by_sqs = dead_letter(sqs, dlq, "mystery", {})
    not_a_job = sqs.send_message(QueueUrl=dlq, MessageBody="garbage")["MessageId"]

    result = runner.invoke(args=["sqs-jobs", "dlq", "list", "default"])

    assert listed(ok(result)) == {
        with_reason: [
            f"{with_reason}  job_type=boom",
            "  reason: KeyError: 'user 42 not found' (failed"
            " 2026-11-30T06:22:55.737Z, receive 2, from default)",
            '  payload: {"user_id": 42}',
        ],
        by_sqs: [
            f"{by_sqs}  job_type=mystery",
            "  reason: unknown (moved by SQS's redrive policy)",
            "  payload: {}",
        ],
        not_a_job: [
            f"{not_a_job}  job_type=None",
            "  reason: unknown (moved by SQS's redrive policy)",
            "  body (not a job): 'garbage'",
        ],
    }
    assert counts(sqs, dlq) == (3, 0, 0), "listing consumed or hid dead letters"


#: Dead-letter fields crafted to forge lines and drive the terminal: C0 (ESC, CR,
#: LF, BEL), C1 (CSI), DEL and a lone surrogate, all valid once JSON-escaped.
CRAFTED_JOB_TYPE = "evil\x1b[2J\nfake-id  job_type=forged"
CRAFTED_REASON = {
    "error_type": "Key\rError",
    "error": "\x9b31mred\x7f\udc80",
    "failed_at": "2026-11-30T06:22:55.737Z",
    "source_queue": "default\x07",
    "receive_count": 2,
}


def test_dlq_list_escapes_control_characters_in_what_it_prints(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    crafted = dead_letter(
        sqs, dlq, CRAFTED_JOB_TYPE, {"note": "\x1b[0m"}, reason=CRAFTED_REASON
    )
    not_a_job = sqs.send_message(
        QueueUrl=dlq, MessageBody="garbage\r\nfake-id  job_type=forged"
    )["MessageId"]

    result = runner.invoke(args=["sqs-jobs", "dlq", "list", "default"])

    assert listed(ok(result)) == {
        crafted: [
            f"{crafted}  job_type=evil\\x1b[2J\\nfake-id  job_type=forged",
            "  reason: Key\\rError: \\x9b31mred\\x7f\\udc80 (failed"
            " 2026-11-30T06:22:55.737Z, receive 2, from default\\x07)",
            '  payload: {"note": "\\u001b[0m"}',
        ],
        not_a_job: [
            f"{not_a_job}  job_type=None",
            "  reason: unknown (moved by SQS's redrive policy)",
            "  body (not a job): 'garbage\\r\\nfake-id  job_type=forged'",
        ],
    }


def test_dlq_list_json_is_ascii_and_keeps_the_crafted_fields_intact(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dead_letter(
        sqs,
        queue_urls["default-dlq"],
        CRAFTED_JOB_TYPE,
        {"note": "\x1b[0m"},
        reason=CRAFTED_REASON,
    )

    result = runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"])

    output = ok(result)
    assert output.isascii()
    assert not [c for c in output if not c.isprintable() and c != "\n"]
    [letter] = json.loads(output)["dead_letters"]
    assert letter["job_type"] == CRAFTED_JOB_TYPE
    assert letter["dead_letter"] == CRAFTED_REASON
    assert letter["payload"] == {"note": "\x1b[0m"}


def test_dlq_list_json_describes_each_dead_letter(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    message_id = dead_letter(
        sqs,
        dlq,
        "boom",
        {"user_id": 42},
        reason=REASON,
        correlation_fields={"request_id": "r-1"},
    )

    result = runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"])

    report = json.loads(ok(result))
    assert report["queue"] == "default"
    [letter] = report["dead_letters"]
    assert int(letter.pop("sent_timestamp")) > 0
    assert letter == {
        "message_id": message_id,
        "job_type": "boom",
        "payload": {"user_id": 42},
        "body": None,
        "dead_letter": REASON,
        "offloaded_bytes": None,
        "receive_count": "1",
    }
    assert counts(sqs, dlq) == (1, 0, 0)


def test_dlq_list_limit_caps_how_many_are_shown(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    ids = {dead_letter(sqs, dlq, "boom", {"n": n}, reason=REASON) for n in range(3)}

    result = runner.invoke(
        args=["sqs-jobs", "dlq", "list", "default", "--limit", "2", "--json"]
    )

    letters = json.loads(ok(result))["dead_letters"]
    assert len(letters) == 2
    assert {letter["message_id"] for letter in letters} < ids
    assert counts(sqs, dlq) == (3, 0, 0)


def test_dlq_list_of_an_empty_dead_letter_queue(runner: FlaskCliRunner) -> None:
    text = runner.invoke(args=["sqs-jobs", "dlq", "list", "default"])
    as_json = runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"])

    assert ok(text) == "no dead letters for 'default'\n"
    assert json.loads(ok(as_json)) == {"queue": "default", "dead_letters": []}


@pytest.mark.parametrize("command", ["list", "redrive"])
def test_dlq_of_a_queue_without_redrive_policy_exits_2_naming_the_fix(
    runner: FlaskCliRunner, command: str
) -> None:
    result = runner.invoke(args=["sqs-jobs", "dlq", command, "critical"])

    assert error_line(result, 2) == (
        "Error: queue 'critical' has no dead-letter queue (no RedrivePolicy); add"
        " one, e.g. with `flask sqs-jobs create-queues`"
    )


@pytest.mark.parametrize("command", ["list", "redrive"])
def test_dlq_of_an_unknown_queue_exits_2(runner: FlaskCliRunner, command: str) -> None:
    result = runner.invoke(args=["sqs-jobs", "dlq", command, "nope"])

    assert error_line(result, 2) == (
        "Error: unknown queue 'nope'; configured queues (SQS_JOBS_QUEUES):"
        " 'default', 'critical'"
    )


# -- dlq redrive --------------------------------------------------------------------


def test_dlq_redrive_job_type_moves_only_that_type_without_its_reason(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    for n in range(2):
        dead_letter(
            sqs,
            dlq,
            "boom",
            {"n": n},
            reason=REASON,
            correlation_fields={"request_id": f"r-{n}"},
        )
    other = dead_letter(sqs, dlq, "other", {"n": 9}, reason=REASON)

    result = runner.invoke(
        args=["sqs-jobs", "dlq", "redrive", "default", "--job-type", "boom"]
    )

    assert ok(result) == "moved 2 dead letter(s) back to 'default'; 1 left\n"
    back = visible_messages(sqs, queue_urls["default"])
    assert sorted(json.loads(m["Body"])["payload"]["n"] for m in back) == [0, 1]
    for message in back:
        attributes = message["MessageAttributes"]
        assert set(attributes) == {"correlation_fields"}, "the reason travelled back"
        n = json.loads(message["Body"])["payload"]["n"]
        assert json.loads(attributes["correlation_fields"]["StringValue"]) == {
            "request_id": f"r-{n}"
        }
    # The one left is visible at once, for the next command or a person.
    assert counts(sqs, dlq) == (1, 0, 0)
    [left] = visible_messages(sqs, dlq)
    assert left["MessageId"] == other


def test_dlq_redrive_limit_moves_at_most_that_many(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    for n in range(3):
        dead_letter(sqs, dlq, "boom", {"n": n}, reason=REASON)

    result = runner.invoke(
        args=["sqs-jobs", "dlq", "redrive", "default", "--limit", "1"]
    )

    assert ok(result) == "moved 1 dead letter(s) back to 'default'; 2 left\n"
    assert message_count(sqs, queue_urls["default"]) == 1
    assert counts(sqs, dlq) == (2, 0, 0)


def test_dlq_redrive_of_everything_empties_the_dead_letter_queue(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    dlq = queue_urls["default-dlq"]
    for n in range(12):
        dead_letter(sqs, dlq, f"type-{n % 3}", {"n": n}, reason=REASON)

    result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"])

    assert ok(result) == "moved 12 dead letter(s) back to 'default'; 0 left\n"
    assert message_count(sqs, dlq) == 0
    assert message_count(sqs, queue_urls["default"]) == 12


def test_dlq_redrive_on_an_empty_dead_letter_queue_moves_nothing(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"])

    assert ok(result) == "moved 0 dead letter(s) back to 'default'; 0 left\n"
    assert message_count(sqs, queue_urls["default"]) == 0


def fail_every_job_sent_to(
    monkeypatch: pytest.MonkeyPatch,
    client: SQSClient,
    source: str,
    dlq: str,
    *,
    times: int,
) -> list[str]:
    """Make ``client`` behave as if a worker failed each job sent to ``source``.

    Right after each SendMessage to ``source`` (up to ``times`` of them), the
    job is taken off it and dead-lettered again as the worker does: same body
    and attributes, a new reason, a new MessageId. Returns those MessageIds.
    """
    returned: list[str] = []
    send_message = client.send_message

    def send_and_fail(**params: t.Any) -> t.Any:
        response = send_message(**params)
        if params["QueueUrl"] == source and len(returned) < times:
            dead_letter_again()
        return response

    def dead_letter_again() -> None:
        [message] = client.receive_message(
            QueueUrl=source, MessageAttributeNames=["All"], VisibilityTimeout=30
        )["Messages"]
        attributes: dict[str, t.Any] = dict(message.get("MessageAttributes", {}))
        attributes["dead_letter"] = {
            "DataType": "String",
            "StringValue": json.dumps({**REASON, "receive_count": 5}),
        }
        sent = send_message(
            QueueUrl=dlq, MessageBody=message["Body"], MessageAttributes=attributes
        )
        client.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
        returned.append(sent["MessageId"])

    monkeypatch.setattr(client, "send_message", send_and_fail)
    return returned


def test_dlq_redrive_moves_each_job_once_while_a_worker_fails_them_again(
    monkeypatch: pytest.MonkeyPatch,
    bare_app: Flask,
    runner: FlaskCliRunner,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    """Jobs that come back to the DLQ during the run stay there for the next one."""
    dlq, source = queue_urls["default-dlq"], queue_urls["default"]
    for n in range(2):
        dead_letter(
            sqs,
            dlq,
            "boom",
            {"n": n},
            reason=REASON,
            correlation_fields={"request_id": f"r-{n}"},
        )
    with bare_app.app_context():
        client = jobs.client(bare_app)
    returned = fail_every_job_sent_to(monkeypatch, client, source, dlq, times=20)

    result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"])

    assert ok(result) == "moved 2 dead letter(s) back to 'default'; 2 left\n"
    assert len(returned) == 2
    left = visible_messages(sqs, dlq)
    assert sorted(m["MessageId"] for m in left) == sorted(returned)
    assert sorted(json.loads(m["Body"])["payload"]["n"] for m in left) == [0, 1]
    assert message_count(sqs, source) == 0


class TestFifoRedrive:
    @pytest.fixture
    def app_config(self, sqs: SQSClient) -> dict[str, t.Any]:
        dlq = create_queue(sqs, "app-orders-dlq.fifo", fifo=True)
        create_queue(
            sqs,
            "app-orders.fifo",
            fifo=True,
            dead_letter_url=dlq,
            max_receive_count=100,
        )
        return {"SQS_JOBS_QUEUES": {"orders": {"name": "app-orders.fifo"}}}

    def test_a_fifo_dead_letter_goes_back_to_its_message_group(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        dlq = sqs.get_queue_url(QueueName="app-orders-dlq.fifo")["QueueUrl"]
        source = sqs.get_queue_url(QueueName="app-orders.fifo")["QueueUrl"]
        sqs.send_message(
            QueueUrl=dlq,
            MessageBody=json.dumps({"job_type": "ship", "payload": {"order": 7}}),
            MessageGroupId="customer-7",
        )

        result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "orders"])

        assert ok(result) == "moved 1 dead letter(s) back to 'orders'; 0 left\n"
        [back] = visible_messages(sqs, source)
        assert back["Attributes"]["MessageGroupId"] == "customer-7"
        assert json.loads(back["Body"])["payload"] == {"order": 7}
        assert message_count(sqs, dlq) == 0


# -- enqueue ------------------------------------------------------------------------


def only_job(sqs: SQSClient, url: str) -> SentJob:
    jobs = sent_jobs(sqs, url)
    assert len(jobs) == 1, jobs
    return jobs[0]


def test_enqueue_sends_one_job_and_prints_its_message_id(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(
        args=["sqs-jobs", "enqueue", "critical", "send_report", '{"id": 1}']
    )

    job = only_job(sqs, queue_urls["critical"])
    assert ok(result) == f"{job.message_id}\n"
    assert (job.job_type, job.payload, job.correlation_fields) == (
        "send_report",
        {"id": 1},
        {},
    )
    assert message_count(sqs, queue_urls["default"]) == 0


@pytest.fixture
def structlog_defaults() -> cabc.Iterator[None]:
    """structlog as in an application that never configures it: printing to stdout."""
    config = structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.configure(**config)


@pytest.mark.usefixtures("structlog_defaults")
def test_enqueue_keeps_stdout_for_the_message_id_when_structlog_prints_there(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(args=["sqs-jobs", "enqueue", "default", "ping"])

    assert result.exit_code == 0, result.output
    assert result.stdout == f"{only_job(sqs, queue_urls['default']).message_id}\n"
    assert "job_enqueued" in result.stderr


def test_enqueue_without_a_payload_sends_an_empty_object(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(args=["sqs-jobs", "enqueue", "default", "ping"])

    job = only_job(sqs, queue_urls["default"])
    assert ok(result) == f"{job.message_id}\n"
    assert job.payload == {}


def test_enqueue_delay_sends_a_delayed_job(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(
        args=["sqs-jobs", "enqueue", "default", "ping", "{}", "--delay", "60"]
    )

    ok(result)
    assert counts(sqs, queue_urls["default"]) == (0, 0, 1)


def test_enqueue_job_id_sends_the_given_job_id(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = runner.invoke(
        args=["sqs-jobs", "enqueue", "default", "ping", "{}", "--job-id", "ops:1"]
    )

    ok(result)
    [message] = visible_messages(sqs, queue_urls["default"])
    assert json.loads(message["Body"])["job_id"] == "ops:1"


def test_enqueue_without_job_id_sends_a_random_one(
    runner: FlaskCliRunner, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    ok(runner.invoke(args=["sqs-jobs", "enqueue", "default", "ping"]))

    [message] = visible_messages(sqs, queue_urls["default"])
    job_id = json.loads(message["Body"])["job_id"]
    assert isinstance(job_id, str)
    assert len(job_id) == 32


@pytest.mark.parametrize("job_id", ["", "a b", "a/b", "x" * 129])
def test_enqueue_an_invalid_job_id_exits_2_and_sends_nothing(
    runner: FlaskCliRunner,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    job_id: str,
) -> None:
    result = runner.invoke(
        args=["sqs-jobs", "enqueue", "default", "ping", "{}", "--job-id", job_id]
    )

    assert error_line(result, 2).startswith("Error: job_id must be 1..128 characters")
    assert message_count(sqs, queue_urls["default"]) == 0


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ("[1, 2]", "Error: PAYLOAD_JSON must be a JSON object, e.g. '{\"id\": 1}'"),
        ('"text"', "Error: PAYLOAD_JSON must be a JSON object, e.g. '{\"id\": 1}'"),
        ("{id: 1}", "Error: PAYLOAD_JSON is not JSON: Expecting property name"),
        ("", "Error: PAYLOAD_JSON is not JSON: Expecting value"),
    ],
)
def test_enqueue_a_payload_that_is_not_a_json_object_exits_2(
    runner: FlaskCliRunner,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    payload: str,
    error: str,
) -> None:
    result = runner.invoke(args=["sqs-jobs", "enqueue", "default", "ping", payload])

    assert error_line(result, 2).startswith(error)
    assert message_count(sqs, queue_urls["default"]) == 0


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (["[" * 100_000], "Error: PAYLOAD_JSON is nested too deeply to read"),
        (['{"a":' * 100_000], "Error: PAYLOAD_JSON is nested too deeply to read"),
        (["{}", "--delay", str(10**20)], "Error: delay_seconds must be 0..31536000"),
    ],
    ids=["arrays", "objects", "delay of 10**20"],
)
def test_enqueue_input_that_cannot_be_sent_exits_2_with_one_line(
    runner: FlaskCliRunner,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    arguments: list[str],
    error: str,
) -> None:
    result = runner.invoke(args=["sqs-jobs", "enqueue", "default", "ping", *arguments])

    assert error_line(result, 2).startswith(error)
    assert message_count(sqs, queue_urls["default"]) == 0


def test_enqueue_to_an_unknown_queue_exits_2(runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["sqs-jobs", "enqueue", "nope", "ping", "{}"])

    assert error_line(result, 2) == (
        "Error: unknown queue 'nope'; configured queues (SQS_JOBS_QUEUES):"
        " 'default', 'critical'"
    )


def test_enqueue_to_a_queue_missing_from_sqs_exits_2_naming_it(
    make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    queues = {**app_config["SQS_JOBS_QUEUES"], "reports": {"name": "app-reports"}}
    app = make_app({**app_config, "SQS_JOBS_QUEUES": queues})

    result = app.test_cli_runner().invoke(args=["sqs-jobs", "enqueue", "reports", "x"])

    assert "SQS has no queue named 'app-reports'" in error_line(result, 2)


class TestFifoEnqueue:
    @pytest.fixture
    def app_config(self, sqs: SQSClient) -> dict[str, t.Any]:
        create_queue(sqs, "app-orders.fifo", fifo=True)
        return {"SQS_JOBS_QUEUES": {"orders": {"name": "app-orders.fifo"}}}

    def test_group_id_sets_the_message_group(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        url = sqs.get_queue_url(QueueName="app-orders.fifo")["QueueUrl"]

        result = runner.invoke(
            args=["sqs-jobs", "enqueue", "orders", "ship", "{}", "--group-id", "c-7"]
        )

        [message] = visible_messages(sqs, url)
        assert ok(result) == f"{message['MessageId']}\n"
        assert message["Attributes"]["MessageGroupId"] == "c-7"

    def test_without_group_id_it_exits_2(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        result = runner.invoke(args=["sqs-jobs", "enqueue", "orders", "ship"])

        assert "message_group_id" in error_line(result, 2)


# -- SQS out of reach, AWS not set up -------------------------------------------------


@pytest.fixture
def refusing_endpoint() -> cabc.Iterator[str]:
    """An endpoint URL on which every connection is refused (bound, not listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def plain_app(config: cabc.Mapping[str, t.Any]) -> Flask:
    """An app whose SQS client really connects (no moto mock active)."""
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={
            "default": {"name": "app-default"},
            "critical": {"name": "app-critical"},
        },
        **config,
    )
    SQSJobs(app)
    return app


OPERATOR_COMMANDS = pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["dlq", "list", "default"],
        ["dlq", "redrive", "default"],
        ["enqueue", "default", "ping"],
    ],
    ids=["stats", "dlq-list", "dlq-redrive", "enqueue"],
)


@OPERATOR_COMMANDS
def test_an_unreachable_endpoint_exits_1_with_one_error_line(
    refusing_endpoint: str, args: list[str]
) -> None:
    app = plain_app({"SQS_JOBS_ENDPOINT_URL": refusing_endpoint})

    result = app.test_cli_runner().invoke(args=["sqs-jobs", *args])

    assert error_line(result, 1).startswith(
        f"Error: SQS call failed ({refusing_endpoint}): Could not connect to the"
        f' endpoint URL: "{refusing_endpoint}/"'
    )


@OPERATOR_COMMANDS
def test_no_region_configured_exits_2_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    app = plain_app({})

    result = app.test_cli_runner().invoke(args=["sqs-jobs", *args])

    assert error_line(result, 2) == (
        "Error: no AWS region is configured for SQS: set SQS_JOBS_REGION_NAME (or"
        " FLASK_SQS_JOBS_REGION_NAME, or AWS_DEFAULT_REGION)"
    )


# -- enqueue_many through the extension ------------------------------------------------


@pytest.fixture
def batch_app(bare_app: Flask, jobs: SQSJobs) -> Flask:
    @bare_app.post("/batch")
    def batch() -> dict[str, list[str]]:
        return {
            "message_ids": jobs.enqueue_many(
                "default",
                [
                    ("record", {"n": 1}),
                    {
                        "job_type": "record",
                        "payload": {"n": 2},
                        "correlation_fields": {"tenant": "t-1"},
                    },
                ],
            )
        }

    return bare_app


def fields_by_payload(sqs: SQSClient, url: str) -> dict[int, dict[str, t.Any]]:
    return {job.payload["n"]: job.correlation_fields for job in sent_jobs(sqs, url)}


def test_enqueue_many_in_a_request_adds_its_request_id_to_every_job(
    batch_app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    response = batch_app.test_client().post("/batch", headers={"X-Request-ID": "r-9"})

    assert response.status_code == 200
    assert len(response.json["message_ids"]) == 2  # type: ignore[index]
    assert fields_by_payload(sqs, queue_urls["default"]) == {
        1: {"request_id": "r-9"},
        2: {"request_id": "r-9", "tenant": "t-1"},
    }


def test_enqueue_many_in_a_request_without_the_header_shares_one_generated_id(
    batch_app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    response = batch_app.test_client().post("/batch")

    generated = response.headers["X-Request-ID"]
    assert generated
    assert fields_by_payload(sqs, queue_urls["default"]) == {
        1: {"request_id": generated},
        2: {"request_id": generated, "tenant": "t-1"},
    }


def test_enqueue_many_outside_a_request_adds_no_request_id(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    with bare_app.app_context():
        ids = jobs.enqueue_many("default", [("record", {"n": 1}), ("record", {"n": 2})])

    assert sorted(ids) == sorted(
        j.message_id for j in sent_jobs(sqs, queue_urls["default"])
    )
    assert fields_by_payload(sqs, queue_urls["default"]) == {1: {}, 2: {}}


class TestEagerEnqueueMany:
    @pytest.fixture
    def app_config(self, app_config: dict[str, t.Any]) -> dict[str, t.Any]:
        return {**app_config, "SQS_JOBS_EAGER": True}

    def test_every_job_runs_in_order_and_nothing_reaches_sqs(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        ran: list[Payload],
        sqs: SQSClient,
        queue_urls: dict[str, str],
    ) -> None:
        with bare_app.app_context():
            ids = jobs.enqueue_many(
                "default",
                [
                    ("record", {"n": 1}),
                    {"job_type": "record", "payload": {"n": 2}, "delay_seconds": 60},
                    ("record", {"n": 3}),
                ],
            )

        assert ran == [{"n": 1}, {"n": 2}, {"n": 3}]
        assert len(set(ids)) == 3
        assert all(isinstance(message_id, str) and message_id for message_id in ids)
        assert message_count(sqs, queue_urls["default"]) == 0

    @pytest.mark.parametrize(
        ("bad", "error"),
        [(("record", [1]), TypeError), (("no_such_type", {}), LookupError)],
    )
    def test_a_bad_job_is_refused_before_any_job_runs(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        ran: list[Payload],
        bad: t.Any,
        error: type[Exception],
    ) -> None:
        with bare_app.app_context(), pytest.raises(error):
            jobs.enqueue_many("default", [("record", {"n": 1}), bad])

        assert ran == []
