"""``SQS_JOBS_LARGE_PAYLOADS``: checked at init_app, used by enqueue, worker and CLI."""

from __future__ import annotations

import json
import typing as t

import boto3
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient

BUCKET = "app-payloads"
QUEUES = {"default": {"name": "big-default"}}
BIG = {"blob": "y" * 3000}


def init(**config: t.Any) -> tuple[Flask, SQSJobs]:
    app = Flask(__name__)
    app.config.update(config)
    jobs = SQSJobs()
    jobs.init_app(app)
    return app, jobs


def test_large_payloads_are_off_by_default() -> None:
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES)
    assert jobs.config(app).large_payloads is None


def test_the_setting_may_be_json() -> None:
    app, jobs = init(
        SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_LARGE_PAYLOADS=json.dumps({"bucket": BUCKET})
    )
    assert jobs.config(app).large_payloads == {"bucket": BUCKET}


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ([BUCKET], TypeError, "SQS_JOBS_LARGE_PAYLOADS must be a dict"),
        ({"prefix": "x/"}, ValueError, "'bucket' is required"),
        (
            {"bucket": BUCKET, "treshold": 1},
            ValueError,
            r"unknown key\(s\) \['treshold'\]",
        ),
        (
            {"bucket": BUCKET, "always": "yes"},
            TypeError,
            "always must be True or False",
        ),
        ({"bucket": BUCKET, "threshold_bytes": 1.5}, TypeError, "threshold_bytes"),
        ({"bucket": "UPPER"}, ValueError, "bucket must be an S3 bucket name"),
        (
            {"bucket": BUCKET, "threshold_bytes": 2_000_000},
            ValueError,
            r"threshold_bytes must be at most 1,048,576 .*got 2,000,000",
        ),
        ({"bucket": BUCKET, "max_bytes": 0}, ValueError, "max_bytes must be >= 1"),
        ({"bucket": BUCKET, "max_bytes": "1MB"}, TypeError, "max_bytes must be a"),
        ("{not json", ValueError, "not JSON"),
    ],
)
def test_a_bad_setting_fails_init_app_naming_the_key(
    value: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match) as caught:
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_LARGE_PAYLOADS=value)
    assert "SQS_JOBS_LARGE_PAYLOADS" in str(caught.value)


@pytest.fixture
def app_config(sqs: SQSClient) -> dict[str, t.Any]:
    return {
        "SQS_JOBS_QUEUES": QUEUES,
        "SQS_JOBS_IDLE_WAIT_SECONDS": 0,
        "SQS_JOBS_LARGE_PAYLOADS": {"bucket": BUCKET, "threshold_bytes": 1000},
    }


def test_create_queues_creates_the_bucket_once(
    runner: FlaskCliRunner, sqs: SQSClient
) -> None:
    first = runner.invoke(args=["sqs-jobs", "create-queues"])
    second = runner.invoke(args=["sqs-jobs", "create-queues"])
    assert first.exit_code == 0, first.output
    assert f"large payloads: bucket {BUCKET} created" in first.output
    assert f"large payloads: bucket {BUCKET} exists, left unchanged" in second.output
    s3 = boto3.client("s3", region_name="us-east-1")
    assert BUCKET in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_a_flask_app_sends_and_runs_a_large_job_through_s3(
    make_app: MakeApp, jobs: SQSJobs, runner: FlaskCliRunner, sqs: SQSClient
) -> None:
    app = make_app()
    runner.invoke(args=["sqs-jobs", "create-queues"])
    seen: list[dict[str, t.Any]] = []
    jobs.handler("big")(seen.append)
    with app.app_context():
        jobs.enqueue("default", "big", BIG)
        url = jobs.queue_group(app).queue("default").url
        s3 = boto3.client("s3", region_name="us-east-1")
        assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 1
        jobs.create_worker(app, should_stop=stop_after(1)).run()
    assert seen == [BIG]
    assert message_count(sqs, url) == 0
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_dlq_list_shows_an_offloaded_dead_letter_and_its_size(
    make_app: MakeApp, jobs: SQSJobs, runner: FlaskCliRunner, sqs: SQSClient
) -> None:
    make_app()
    runner.invoke(args=["sqs-jobs", "create-queues"])
    dlq = sqs.get_queue_url(QueueName="big-default-dlq")["QueueUrl"]
    sqs.send_message(
        QueueUrl=dlq,
        MessageBody=json.dumps(
            [
                "software.amazon.payloadoffloading.PayloadS3Pointer",
                {"s3BucketName": BUCKET, "s3Key": "sqs-jobs/k"},
            ]
        ),
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": "3042"}
        },
    )
    text = runner.invoke(args=["sqs-jobs", "dlq", "list", "default"])
    assert "payload: offloaded to S3 (3042 bytes)" in text.output
    report = runner.invoke(args=["sqs-jobs", "dlq", "list", "default", "--json"])
    [letter] = json.loads(report.output)["dead_letters"]
    assert letter["offloaded_bytes"] == 3042


def test_dlq_redrive_moves_the_pointer_back_unchanged(
    make_app: MakeApp, runner: FlaskCliRunner, sqs: SQSClient
) -> None:
    make_app()
    runner.invoke(args=["sqs-jobs", "create-queues"])
    dlq = sqs.get_queue_url(QueueName="big-default-dlq")["QueueUrl"]
    source = sqs.get_queue_url(QueueName="big-default")["QueueUrl"]
    pointer = json.dumps(
        [
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": BUCKET, "s3Key": "sqs-jobs/k"},
        ]
    )
    size: t.Any = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "3042"}}
    sqs.send_message(QueueUrl=dlq, MessageBody=pointer, MessageAttributes=size)
    result = runner.invoke(args=["sqs-jobs", "dlq", "redrive", "default"])
    assert result.exit_code == 0, result.output
    [moved] = sqs.receive_message(
        QueueUrl=source, MessageAttributeNames=["All"], WaitTimeSeconds=0
    )["Messages"]
    assert moved["Body"] == pointer
    assert moved["MessageAttributes"]["ExtendedPayloadSize"]["StringValue"] == "3042"


def test_max_bytes_and_a_prefix_without_a_slash_reach_the_app(
    make_app: MakeApp,
    jobs: SQSJobs,
    runner: FlaskCliRunner,
    app_config: dict[str, t.Any],
) -> None:
    settings = {"bucket": BUCKET, "prefix": "app", "threshold_bytes": 1000}
    app = make_app(
        {**app_config, "SQS_JOBS_LARGE_PAYLOADS": {**settings, "max_bytes": 4000}}
    )
    runner.invoke(args=["sqs-jobs", "create-queues"])
    s3 = boto3.client("s3", region_name="us-east-1")
    with app.app_context():
        jobs.enqueue("default", "big", BIG)
        with pytest.raises(ValueError, match=r"max_bytes \(4,000\)"):
            jobs.enqueue("default", "big", {"blob": "y" * 5000})
    [stored] = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert stored["Key"].startswith("app/")
