"""``flask sqs-worker`` and ``flask sqs-jobs``, run with ``app.test_cli_runner()``."""

from __future__ import annotations

import json
import os
import signal
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def ran(jobs: SQSJobs) -> list[Payload]:
    payloads: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        payloads.append(payload)

    return payloads


def only_error_line(result: Result) -> str:
    """The one line a configuration error prints: no usage block, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Usage:" not in result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def stop_the_worker(sender: Flask, **extra: t.Any) -> None:
    """A signal receiver that stops the worker as an operator would: SIGTERM."""
    os.kill(os.getpid(), signal.SIGTERM)


# -- sqs-worker: usage and configuration errors (exit 2, one line) ----------------


def test_an_unknown_queue_exits_2_naming_the_configured_queues(
    runner: FlaskCliRunner, ran: list[Payload]
) -> None:
    result = runner.invoke(
        args=["sqs-worker", "--queue", "critical", "--queue", "nope"]
    )

    assert only_error_line(result) == (
        "Error: unknown queue 'nope'; configured queues (SQS_JOBS_QUEUES):"
        " 'default', 'critical'"
    )


def test_an_unknown_queue_from_the_environment_exits_2(
    runner: FlaskCliRunner, ran: list[Payload]
) -> None:
    result = runner.invoke(
        args=["sqs-worker"], env={"FLASK_SQS_WORKER_QUEUE": "default reports"}
    )

    assert "unknown queue 'reports'" in only_error_line(result)


def test_no_registered_handlers_exits_2(runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["sqs-worker"])

    assert only_error_line(result) == (
        "Error: no job handlers are registered: decorate functions with"
        " @jobs.handler('job_type') in a module the app imports"
    )


def test_eager_mode_exits_2(
    make_app: MakeApp, app_config: dict[str, t.Any], ran: list[Payload]
) -> None:
    app = make_app({**app_config, "SQS_JOBS_EAGER": True})

    result = app.test_cli_runner().invoke(args=["sqs-worker"])

    assert only_error_line(result).startswith("Error: SQS_JOBS_EAGER is on")


def test_a_queue_missing_from_sqs_exits_2_naming_it(
    make_app: MakeApp, app_config: dict[str, t.Any], ran: list[Payload]
) -> None:
    queues = {**app_config["SQS_JOBS_QUEUES"], "reports": {"name": "app-reports"}}
    app = make_app({**app_config, "SQS_JOBS_QUEUES": queues})

    result = app.test_cli_runner().invoke(args=["sqs-worker"])

    line = only_error_line(result)
    assert line.startswith(
        "Error: queue 'reports': SQS has no queue named 'app-reports'."
    )
    assert "flask sqs-jobs create-queues" in line


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--concurrency", "0"),
        ("--idle-wait", "21"),
        ("--idle-wait", "-1"),
        ("--processes", "0"),
        ("--processes", "many"),
        ("--max-jobs", "0"),
        ("--max-jobs", "-3"),
        ("--max-jobs", "many"),
        ("--max-memory-mb", "0"),
        ("--max-memory-mb", "-1"),
        ("--max-memory-mb", "1.5GB"),
        ("--max-age", "0"),
        ("--max-age", "-60"),
        ("--max-age", "an hour"),
    ],
)
def test_out_of_range_options_exit_2(
    runner: FlaskCliRunner, ran: list[Payload], option: str, value: str
) -> None:
    result = runner.invoke(args=["sqs-worker", option, value])

    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr


@pytest.mark.parametrize(
    "option", ["--shutdown-timeout", "--health-max-age", "--max-age"]
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_seconds_that_are_not_finite_exit_2(
    runner: FlaskCliRunner, ran: list[Payload], option: str, value: str
) -> None:
    """``float()`` reads all of them, and NaN passes any range check."""
    result = runner.invoke(args=["sqs-worker", option, value])

    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr
    assert "Traceback" not in result.output


# -- sqs-worker: running ------------------------------------------------------------


def test_the_worker_runs_jobs_and_exits_0_after_sigterm(
    bare_app: Flask,
    runner: FlaskCliRunner,
    jobs: SQSJobs,
    ran: list[Payload],
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "record", {"n": 1})

    with signals.job_finished.connected_to(stop_the_worker, sender=bare_app):
        result = runner.invoke(args=["sqs-worker"])

    assert result.exit_code == 0, result.output
    assert ran == [{"n": 1}]
    assert message_count(sqs, queue_urls["default"]) == 0


def test_one_process_runs_the_worker_here_without_a_supervisor(
    bare_app: Flask,
    runner: FlaskCliRunner,
    jobs: SQSJobs,
    ran: list[Payload],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flask_sqs_jobs.commands import _supervisor

    def no_supervisor(*args: object, **kwargs: object) -> t.NoReturn:
        raise AssertionError("--processes 1 started a supervisor")

    monkeypatch.setattr(_supervisor, "Supervisor", no_supervisor)
    monkeypatch.setattr(os, "fork", no_supervisor)
    with bare_app.app_context():
        jobs.enqueue("default", "record", {"n": 1})

    with signals.job_finished.connected_to(stop_the_worker, sender=bare_app):
        result = runner.invoke(
            args=["sqs-worker", "--processes", "1"],
            env={"FLASK_SQS_WORKER_PROCESSES": "3"},
        )

    assert result.exit_code == 0, result.output
    assert ran == [{"n": 1}]


def test_queue_options_choose_the_queues_the_worker_polls(
    bare_app: Flask, runner: FlaskCliRunner, ran: list[Payload]
) -> None:
    polled: list[list[str]] = []

    def started(sender: Flask, *, queues: list[str], **extra: t.Any) -> None:
        polled.append(queues)
        stop_the_worker(sender)

    with signals.worker_started.connected_to(started, sender=bare_app):
        result = runner.invoke(args=["sqs-worker", "--queue", "critical"])

    assert result.exit_code == 0, result.output
    assert polled == [["critical"]]


def test_the_worker_restores_the_signal_handlers_it_replaced(
    bare_app: Flask, runner: FlaskCliRunner, ran: list[Payload]
) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

    with signals.worker_started.connected_to(stop_the_worker, sender=bare_app):
        result = runner.invoke(args=["sqs-worker"])

    assert result.exit_code == 0, result.output
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


# -- help texts ---------------------------------------------------------------------


def test_the_worker_help_shows_the_options_and_their_defaults(
    runner: FlaskCliRunner,
) -> None:
    result = runner.invoke(args=["sqs-worker", "--help"])

    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Run a worker for this app's job handlers." in text
    assert "Default: every configured queue." in text
    assert "Jobs run at once, each in its own thread. [default: 1; x>=1]" in text
    assert "Default: SQS_JOBS_IDLE_WAIT_SECONDS." in text


def test_the_operator_commands_are_listed(runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["sqs-jobs", "--help"])

    assert result.exit_code == 0
    assert "create-queues" in result.output
    assert "local-server" in result.output


def test_the_create_queues_help_shows_the_default_receive_count(
    runner: FlaskCliRunner,
) -> None:
    result = runner.invoke(args=["sqs-jobs", "create-queues", "--help"])

    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "to the dead-letter queue. [default: 5; 1<=x<=1000]" in text


def test_the_local_server_help_shows_the_default_port(runner: FlaskCliRunner) -> None:
    result = runner.invoke(args=["sqs-jobs", "local-server", "--help"])

    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "--port INTEGER RANGE [default: 9324; 0<=x<=65535]" in text
    assert "--host TEXT [default: 127.0.0.1]" in text


# -- sqs-jobs create-queues ---------------------------------------------------------


class TestCreateQueues:
    @pytest.fixture
    def app_config(self, sqs: SQSClient) -> dict[str, t.Any]:
        """Queues that do not exist yet, one of them FIFO, one given by URL."""
        return {
            "SQS_JOBS_QUEUES": {
                "default": {"name": "new-default", "visibility_timeout": 45},
                "orders": {"name": "new-orders.fifo"},
                "reports": {
                    "url": "https://sqs.us-east-1.amazonaws.com/123456789012/new-reports"
                },
            },
        }

    @staticmethod
    def attributes(sqs: SQSClient, name: str) -> dict[str, str]:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        return {str(k): v for k, v in attributes["Attributes"].items()}

    def redrive(self, sqs: SQSClient, name: str) -> tuple[str, int]:
        policy = json.loads(self.attributes(sqs, name)["RedrivePolicy"])
        return policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])

    def test_each_queue_is_created_with_a_dead_letter_queue_and_redrive_policy(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        result = runner.invoke(args=["sqs-jobs", "create-queues"])

        assert result.exit_code == 0, result.output
        for name, dlq in [
            ("new-default", "new-default-dlq"),
            ("new-orders.fifo", "new-orders-dlq.fifo"),
            ("new-reports", "new-reports-dlq"),
        ]:
            dlq_arn = self.attributes(sqs, dlq)["QueueArn"]
            assert self.redrive(sqs, name) == (dlq_arn, 5)
        assert self.attributes(sqs, "new-default")["VisibilityTimeout"] == "45"
        assert self.attributes(sqs, "new-orders.fifo")["FifoQueue"] == "true"
        assert self.attributes(sqs, "new-orders-dlq.fifo")["FifoQueue"] == "true"
        assert result.output.splitlines()[0] == (
            "default: new-default created, dead letters to new-default-dlq after 5"
            " receives; new-default-dlq created  "
            + sqs.get_queue_url(QueueName="new-default")["QueueUrl"]
        )

    def test_running_it_again_leaves_the_existing_queues_unchanged(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        first = runner.invoke(args=["sqs-jobs", "create-queues"])
        url = sqs.get_queue_url(QueueName="new-default")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="{}")
        before = {
            name: self.attributes(sqs, name)
            for name in ("new-default", "new-default-dlq", "new-orders.fifo")
        }

        second = runner.invoke(
            args=["sqs-jobs", "create-queues", "--max-receive-count", "3"]
        )

        assert (first.exit_code, second.exit_code) == (0, 0), second.output
        assert second.output.splitlines() == [
            "default: new-default exists, left unchanged (dead letters to"
            f" new-default-dlq after 5 receives)  {url}",
            "orders: new-orders.fifo exists, left unchanged (dead letters to"
            " new-orders-dlq.fifo after 5 receives)  "
            + sqs.get_queue_url(QueueName="new-orders.fifo")["QueueUrl"],
            "reports: new-reports exists, left unchanged (dead letters to"
            " new-reports-dlq after 5 receives)  "
            + sqs.get_queue_url(QueueName="new-reports")["QueueUrl"],
        ]
        assert sqs.get_queue_url(QueueName="new-default")["QueueUrl"] == url
        assert message_count(sqs, url) == 1
        for name, attributes in before.items():
            assert self.comparable(self.attributes(sqs, name)) == self.comparable(
                attributes
            ), name

    @staticmethod
    def comparable(attributes: dict[str, str]) -> dict[str, str]:
        """Queue attributes less the counts and timestamps that change by themselves."""
        return {
            k: v
            for k, v in attributes.items()
            if not k.startswith("Approximate") and k != "LastModifiedTimestamp"
        }

    def test_an_existing_queue_keeps_its_own_dead_letter_queue(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        """A queue made elsewhere, dead-lettering to a DLQ of another name."""
        own_dlq = create_queue(sqs, "team-dead-letters")
        url = create_queue(
            sqs, "new-default", dead_letter_url=own_dlq, max_receive_count=7
        )
        own_arn = self.attributes(sqs, "team-dead-letters")["QueueArn"]

        result = runner.invoke(args=["sqs-jobs", "create-queues"])

        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[0] == (
            "default: new-default exists, left unchanged (dead letters to"
            f" team-dead-letters after 7 receives)  {url}"
        )
        assert self.redrive(sqs, "new-default") == (own_arn, 7)
        assert self.attributes(sqs, "new-default")["VisibilityTimeout"] == "30"
        names = sqs.list_queues(QueueNamePrefix="new-default").get("QueueUrls", [])
        assert names == [url], "created a dead-letter queue nothing uses"

    def test_an_existing_queue_without_a_policy_says_so_and_gets_none(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        url = create_queue(sqs, "new-default")

        result = runner.invoke(args=["sqs-jobs", "create-queues"])

        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[0] == (
            f"default: new-default exists, left unchanged (no dead-letter queue)  {url}"
        )
        assert "RedrivePolicy" not in self.attributes(sqs, "new-default")

    def test_a_missing_queue_uses_its_existing_dead_letter_queue_as_it_is(
        self, runner: FlaskCliRunner, sqs: SQSClient
    ) -> None:
        dlq = create_queue(sqs, "new-default-dlq", MessageRetentionPeriod="3600")

        result = runner.invoke(args=["sqs-jobs", "create-queues"])

        assert result.exit_code == 0, result.output
        line = result.output.splitlines()[0]
        assert line.startswith(
            "default: new-default created, dead letters to new-default-dlq after 5"
            " receives; new-default-dlq exists, left unchanged  "
        )
        assert self.redrive(sqs, "new-default") == (
            self.attributes(sqs, "new-default-dlq")["QueueArn"],
            5,
        )
        assert self.attributes(sqs, "new-default-dlq")["MessageRetentionPeriod"] == (
            "3600"
        )
        assert sqs.get_queue_url(QueueName="new-default-dlq")["QueueUrl"] == dlq

    def test_after_create_queues_jobs_can_be_sent(
        self, bare_app: Flask, runner: FlaskCliRunner, jobs: SQSJobs, sqs: SQSClient
    ) -> None:
        runner.invoke(args=["sqs-jobs", "create-queues"])

        with bare_app.app_context():
            jobs.enqueue("orders", "record", message_group_id="customer-1")

        url = sqs.get_queue_url(QueueName="new-orders.fifo")["QueueUrl"]
        assert message_count(sqs, url) == 1


def test_processes_auto_starts_one_child_per_usable_core(
    runner: FlaskCliRunner, ran: list[Payload], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flask_sqs_jobs.commands import _supervisor

    started: list[int] = []

    class CountingSupervisor:
        def __init__(self, processes: int, *args: object, **kwargs: object) -> None:
            started.append(processes)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(_supervisor, "Supervisor", CountingSupervisor)
    monkeypatch.setattr(os, "process_cpu_count", lambda: 3, raising=False)

    result = runner.invoke(args=["sqs-worker", "--processes", "auto"])

    assert result.exit_code == 0, result.output
    assert started == [3]
