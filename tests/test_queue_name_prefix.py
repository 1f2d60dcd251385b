"""``SQS_JOBS_QUEUE_NAME_PREFIX``: one configuration for several environments."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.sqs._definitions import QueueDefinition

from tests.conftest import MakeApp
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]
OTHER_ACCOUNT_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/shared-jobs"


@pytest.fixture
def app_config(sqs: SQSClient) -> dict[str, t.Any]:
    return {
        "SQS_JOBS_QUEUES": {
            "default": {"name": "app-jobs"},
            "orders": {"name": "app-orders.fifo"},
            "shared": {"url": OTHER_ACCOUNT_URL},
        },
        "SQS_JOBS_QUEUE_NAME_PREFIX": "staging-",
        "SQS_JOBS_IDLE_WAIT_SECONDS": 0,
    }


def definitions(**config: t.Any) -> dict[str, QueueDefinition]:
    """The checked queue definitions of a fresh app with ``config``."""
    app = Flask(__name__)
    app.config.update(config)
    return SQSJobs(app).config(app).definitions


def test_the_prefix_goes_before_every_name_and_never_into_a_url(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    group = jobs.queue_group(bare_app)

    assert group.queue("default").name == "staging-app-jobs"
    assert group.queue("orders").name == "staging-app-orders.fifo"
    assert group.queue("orders").is_fifo
    assert group.queue("shared").url == OTHER_ACCOUNT_URL
    assert jobs.config(bare_app).queue_name_prefix == "staging-"


def test_without_a_prefix_names_are_used_as_given() -> None:
    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = {"default": {"name": "app-jobs"}}
    jobs = SQSJobs(app)

    assert jobs.config(app).queue_name_prefix == ""
    assert jobs.config(app).definitions["default"].name == "app-jobs"


def test_enqueue_and_the_worker_use_the_prefixed_queue(
    sqs: SQSClient, make_app: MakeApp, jobs: SQSJobs
) -> None:
    staging = create_queue(sqs, "staging-app-jobs")
    unprefixed = create_queue(sqs, "app-jobs")
    ran: list[Payload] = []
    jobs.handler("record")(ran.append)
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"default": {"name": "app-jobs"}},
            "SQS_JOBS_QUEUE_NAME_PREFIX": "staging-",
            "SQS_JOBS_IDLE_WAIT_SECONDS": 0,
        }
    )

    with app.app_context():
        jobs.enqueue("default", "record", {"n": 1})
    assert (message_count(sqs, staging), message_count(sqs, unprefixed)) == (1, 0)
    with app.app_context():
        jobs.create_worker(should_stop=stop_after(1)).run()

    assert ran == [{"n": 1}]
    assert message_count(sqs, staging) == 0


def test_create_queues_creates_prefixed_queues_and_dead_letter_queues(
    runner: FlaskCliRunner, sqs: SQSClient
) -> None:
    result = runner.invoke(args=["sqs-jobs", "create-queues"])

    assert result.exit_code == 0, result.output
    names = sorted(url.rsplit("/", 1)[-1] for url in sqs.list_queues()["QueueUrls"])
    assert names == [
        "shared-jobs",
        "shared-jobs-dlq",
        "staging-app-jobs",
        "staging-app-jobs-dlq",
        "staging-app-orders-dlq.fifo",
        "staging-app-orders.fifo",
    ]
    url = sqs.get_queue_url(QueueName="staging-app-jobs")["QueueUrl"]
    policy = json.loads(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])[
            "Attributes"
        ]["RedrivePolicy"]
    )
    assert policy["deadLetterTargetArn"].endswith(":staging-app-jobs-dlq")
    assert "default: staging-app-jobs created" in result.output


def test_stats_reads_the_prefixed_queues(sqs: SQSClient, make_app: MakeApp) -> None:
    dlq = create_queue(sqs, "prod-app-jobs-dlq")
    source = create_queue(sqs, "prod-app-jobs", dead_letter_url=dlq)
    create_queue(sqs, "app-jobs")
    sqs.send_message(QueueUrl=source, MessageBody="{}")
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"default": {"name": "app-jobs"}},
            "SQS_JOBS_QUEUE_NAME_PREFIX": "prod-",
        }
    )

    result = app.test_cli_runner().invoke(args=["sqs-jobs", "stats", "--json"])

    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)["queues"]
    assert entry["url"] == source
    assert entry["visible"] == 1
    assert entry["dead_letter"]["url"] == dlq


def test_the_dashboard_counts_the_prefixed_queues(
    sqs: SQSClient, make_app: MakeApp, jobs: SQSJobs
) -> None:
    source = create_queue(sqs, "prod-app-jobs")
    create_queue(sqs, "app-jobs")
    sqs.send_message(QueueUrl=source, MessageBody="{}")
    app = make_app(
        {
            "SECRET_KEY": "test-secret",
            "SQS_JOBS_QUEUES": {"default": {"name": "app-jobs"}},
            "SQS_JOBS_QUEUE_NAME_PREFIX": "prod-",
        }
    )
    app.register_blueprint(jobs.dashboard(authorize=lambda: True), url_prefix="/jobs")

    data = app.test_client().get("/jobs/", headers={"Accept": "application/json"})

    [row] = data.get_json()["queues"]
    assert (row["queue"], row["visible"], row["error"]) == ("default", 1, None)


def test_the_prefix_may_come_from_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLASK_SQS_JOBS_QUEUES", '{"default": {"name": "app-jobs"}}')
    monkeypatch.setenv("FLASK_SQS_JOBS_QUEUE_NAME_PREFIX", "qa_2-")
    app = Flask(__name__)
    app.config.from_prefixed_env()
    jobs = SQSJobs(app)

    assert jobs.config(app).definitions["default"].name == "qa_2-app-jobs"


@pytest.mark.parametrize(
    "prefix", ["staging.", "prod/", "dev ", "café-", "a:b", "x\n", "-.fifo"]
)
def test_a_prefix_with_characters_sqs_refuses_is_refused_naming_the_key(
    prefix: str,
) -> None:
    with pytest.raises(ValueError, match="letters, digits") as raised:
        definitions(
            SQS_JOBS_QUEUES={"default": {"name": "jobs"}},
            SQS_JOBS_QUEUE_NAME_PREFIX=prefix,
        )

    assert str(raised.value).startswith("SQS_JOBS_QUEUE_NAME_PREFIX ")
    assert repr(prefix) in str(raised.value)


@pytest.mark.parametrize("prefix", [7, b"staging-", ["staging-"], True])
def test_a_prefix_that_is_not_a_string_is_refused_naming_the_key(
    prefix: object,
) -> None:
    with pytest.raises(TypeError, match=r"^SQS_JOBS_QUEUE_NAME_PREFIX must be a str"):
        definitions(
            SQS_JOBS_QUEUES={"default": {"name": "jobs"}},
            SQS_JOBS_QUEUE_NAME_PREFIX=prefix,
        )


@pytest.mark.parametrize(
    ("name", "prefix_length"),
    [("j" * 70, 11), ("j" * 70 + ".fifo", 6), ("jobs", 77)],
)
def test_a_prefixed_name_past_80_characters_is_refused_naming_the_queue(
    name: str, prefix_length: int
) -> None:
    with pytest.raises(ValueError, match="SQS allows at most 80") as raised:
        definitions(
            SQS_JOBS_QUEUES={"ok": {"name": "a"}, "long": {"name": name}},
            SQS_JOBS_QUEUE_NAME_PREFIX="p" * prefix_length,
        )

    message = str(raised.value)
    assert message.startswith("SQS_JOBS_QUEUE_NAME_PREFIX ")
    assert "queue 'long'" in message
    assert f"{len(name) + prefix_length} characters" in message


def test_a_prefixed_name_of_exactly_80_characters_is_accepted() -> None:
    checked = definitions(
        SQS_JOBS_QUEUES={"default": {"name": "j" * 70 + ".fifo"}},
        SQS_JOBS_QUEUE_NAME_PREFIX="p" * 5,
    )

    assert len(checked["default"].name or "") == 80


def test_urls_are_never_measured_against_the_name_limit() -> None:
    checked = definitions(
        SQS_JOBS_QUEUES={"shared": {"url": OTHER_ACCOUNT_URL[:-11] + "q" * 80}},
        SQS_JOBS_QUEUE_NAME_PREFIX="staging-",
    )

    assert checked["shared"].physical_name == "q" * 80
