"""make_handler: SQS records run as the worker runs jobs, reported as Lambda needs.

Events are built from messages received from moto's SQS, so receipt handles,
visibility changes and dead letters are real; the context is a fake one
whose remaining time the test sets.
"""

from __future__ import annotations

import json
import threading
import typing as t

import boto3
import pytest
from flask import current_app
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.aws_lambda import make_handler
from flask_sqs_jobs.aws_lambda import UnknownEventSource

from tests.aws_lambda.events import FakeContext
from tests.aws_lambda.events import lambda_event
from tests.aws_lambda.events import queue_arn
from tests.aws_lambda.events import receive_records
from tests.support import create_queue
from tests.support import message_count
from tests.support import queue_counts
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

NAME = "lambda-jobs"


@pytest.fixture
def dlq_url(sqs: SQSClient) -> str:
    return create_queue(sqs, f"{NAME}-dlq")


@pytest.fixture
def url(sqs: SQSClient, dlq_url: str) -> str:
    return create_queue(
        sqs, NAME, visibility_timeout=30, dead_letter_url=dlq_url, max_receive_count=2
    )


def make_app(jobs: SQSJobs, **config: t.Any) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": NAME}},
        SQS_JOBS_REGION_NAME="us-east-1",
        **config,
    )
    jobs.init_app(app)
    return app


def enqueue(app: Flask, jobs: SQSJobs, job_type: str, **payload: t.Any) -> str:
    with app.app_context():
        return jobs.enqueue("default", job_type, payload)


def invoke(
    app: Flask,
    sqs: SQSClient,
    url: str,
    context: FakeContext | None = None,
    **kw: t.Any,
) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    records = receive_records(sqs, url)
    handler = make_handler(app, check_mapping=False, **kw)
    return handler(lambda_event(records), context or FakeContext()), records


def reported(response: dict[str, t.Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def test_a_job_runs_in_the_app_with_signals_and_is_left_for_the_mapping_to_delete(
    sqs: SQSClient, url: str, log_events: list[EventDict]
) -> None:
    jobs = SQSJobs()
    seen: dict[str, t.Any] = {}

    @jobs.task()
    def greet(name: str) -> str:
        seen["app"] = current_app.name
        seen["job_id"] = current_job.job_id
        return f"hello {name}"

    app = make_app(jobs)
    finished: list[str] = []

    def on_finished(sender: Flask, **kw: t.Any) -> None:
        finished.append(kw["outcome"])

    signals.job_finished.connect(on_finished, app)
    with app.test_request_context(headers={"X-Request-ID": "req-42"}):
        job_id = greet.enqueue(name="Ada").job_id
    response, records = invoke(app, sqs, url)
    assert response == {"batchItemFailures": []}
    assert seen == {"app": app.name, "job_id": job_id}
    assert finished == ["success"]
    started = [e for e in log_events if e["event"] == "job_started"]
    assert started[0]["request_id"] == "req-42"
    assert started[0]["queue"] == "default"
    # Deleting is the mapping's: the message is still in flight, not gone.
    assert queue_counts(sqs, url) == (0, 1, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=records[0]["receiptHandle"])
    assert message_count(sqs, url) == 0


def test_a_failing_job_is_reported_and_a_retry_delay_sets_its_visibility(
    sqs: SQSClient, url: str
) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def again() -> None:
        raise RetryJob(delay_seconds=0)

    @jobs.task()
    def broken() -> None:
        raise RuntimeError("boom")

    app = make_app(jobs)
    enqueue(app, jobs, "again")
    enqueue(app, jobs, "broken")
    response, records = invoke(app, sqs, url)
    assert sorted(reported(response)) == sorted(r["messageId"] for r in records)
    # RetryJob(delay_seconds=0): visible again at once; the plain failure
    # waits for the queue's visibility timeout (30 s).
    visible = visible_messages(sqs, url)
    assert [json.loads(m["Body"])["job_type"] for m in visible] == ["again"]


def test_outcomes_that_delete_are_not_reported(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def refuse() -> None:
        raise NonRetryableError("never")

    app = make_app(jobs)
    enqueue(app, jobs, "refuse")
    sqs.send_message(QueueUrl=url, MessageBody="not json")
    response, _ = invoke(app, sqs, url)
    assert response == {"batchItemFailures": []}


def test_the_last_receive_is_dead_lettered_with_its_reason_then_not_reported(
    sqs: SQSClient, url: str, dlq_url: str
) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def broken() -> None:
        raise RuntimeError("boom")

    app = make_app(jobs)
    enqueue(app, jobs, "broken")
    first, records = invoke(app, sqs, url)
    assert reported(first) == [records[0]["messageId"]]
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=records[0]["receiptHandle"], VisibilityTimeout=0
    )
    second, _ = invoke(app, sqs, url)
    assert second == {"batchItemFailures": []}
    letters = sqs.receive_message(QueueUrl=dlq_url, MessageAttributeNames=["All"])
    reason = json.loads(
        letters["Messages"][0]["MessageAttributes"]["dead_letter"]["StringValue"]
    )
    assert reason["error_type"] == "RuntimeError"
    assert reason["receive_count"] == 2


def test_an_unknown_job_type_is_reported_and_hidden(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def known() -> None: ...

    app = make_app(jobs, SQS_JOBS_CHECK_JOB_TYPES=False)
    enqueue(app, jobs, "not_here")
    response, records = invoke(app, sqs, url)
    assert reported(response) == [records[0]["messageId"]]


def test_too_little_time_left_starts_nothing_and_releases_the_records(
    sqs: SQSClient, url: str, log_events: list[EventDict]
) -> None:
    jobs = SQSJobs()
    ran: list[int] = []

    @jobs.task()
    def work(n: int) -> None:
        ran.append(n)

    app = make_app(jobs)
    for n in range(3):
        enqueue(app, jobs, "work", n=n)
    response, records = invoke(app, sqs, url, FakeContext(remaining_seconds=4))
    assert ran == []
    assert sorted(reported(response)) == sorted(r["messageId"] for r in records)
    assert len(visible_messages(sqs, url)) == 3  # back at once
    assert [e["event"] for e in log_events].count("lambda_time_short") == 1


def test_the_min_remaining_time_is_a_setting(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()
    ran: list[int] = []

    @jobs.task()
    def work() -> None:
        ran.append(1)

    app = make_app(jobs)
    enqueue(app, jobs, "work")
    response, _ = invoke(
        app, sqs, url, FakeContext(remaining_seconds=4), min_remaining_seconds=2
    )
    assert response == {"batchItemFailures": []}
    assert ran == [1]
    with pytest.raises(ValueError, match="min_remaining_seconds must be"):
        make_handler(app, min_remaining_seconds=0)


def test_max_runtime_is_cut_to_the_time_left(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()
    aborted = threading.Event()

    @jobs.task()
    def slow() -> None:
        if current_job.abort_requested.wait(20):
            aborted.set()

    app = make_app(jobs)
    enqueue(app, jobs, "slow")
    response, records = invoke(
        app, sqs, url, FakeContext(remaining_seconds=2.5), min_remaining_seconds=1
    )
    assert aborted.is_set()
    assert reported(response) == [records[0]["messageId"]]


def test_fifo_reports_the_rest_of_a_failed_group_without_running_it(
    sqs: SQSClient,
) -> None:
    fifo = create_queue(sqs, "lambda-jobs.fifo", fifo=True, visibility_timeout=30)
    jobs = SQSJobs()
    ran: list[str] = []

    @jobs.task()
    def step(name: str) -> None:
        ran.append(name)
        if name == "a2":
            raise RuntimeError("a2 fails")

    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = {"default": {"name": "lambda-jobs.fifo"}}
    jobs.init_app(app)
    with app.app_context():
        for name in ("a1", "b1", "a2", "a3", "b2"):
            step.options(message_group_id=name[0]).enqueue(name=name)
    records = receive_records(sqs, fifo)
    assert len(records) == 5
    handler = make_handler(app, check_mapping=False)
    response = handler(lambda_event(records), FakeContext())
    by_id = {r["messageId"]: json.loads(r["body"])["payload"]["name"] for r in records}
    assert [by_id[i] for i in reported(response)] == ["a2", "a3"]
    assert sorted(ran) == ["a1", "a2", "b1", "b2"]


def test_attributes_and_correlation_fields_reach_the_job(
    sqs: SQSClient, url: str
) -> None:
    jobs = SQSJobs()
    seen: dict[str, t.Any] = {}

    @jobs.task()
    def look() -> None:
        seen["fields"] = current_job.correlation_fields

    app = make_app(jobs)
    with app.app_context():
        jobs.enqueue(
            "default",
            "look",
            {},
            correlation_fields={"tenant": "t-1"},
            message_attributes={
                "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}
            },
        )
    records = receive_records(sqs, url)
    assert records[0]["messageAttributes"]["blob"]["binaryValue"] == "AAE="
    response = make_handler(app, check_mapping=False)(
        lambda_event(records), FakeContext()
    )
    assert response == {"batchItemFailures": []}
    assert seen["fields"] == {"tenant": "t-1"}


def test_an_s3_pointer_is_read_as_the_worker_reads_it(sqs: SQSClient, url: str) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="lambda-payloads")
    jobs = SQSJobs()
    seen: list[int] = []

    @jobs.task()
    def big(blob: str) -> None:
        seen.append(len(blob))

    app = make_app(
        jobs, SQS_JOBS_LARGE_PAYLOADS={"bucket": "lambda-payloads", "always": True}
    )
    enqueue(app, jobs, "big", blob="y" * 5000)
    records = receive_records(sqs, url)
    assert "s3BucketName" in records[0]["body"]
    response = make_handler(app, check_mapping=False)(
        lambda_event(records), FakeContext()
    )
    assert response == {"batchItemFailures": []}
    assert seen == [5000]


def test_the_factory_is_called_once_per_environment(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()
    ran: list[int] = []

    @jobs.task()
    def work(n: int) -> None:
        ran.append(n)

    made: list[Flask] = []

    def factory() -> Flask:
        made.append(make_app(jobs))
        return made[-1]

    handler = make_handler(factory, check_mapping=False)
    for n in range(2):
        with (made[0] if made else handler.app).app_context():
            jobs.enqueue("default", "work", {"n": n})
        handler(lambda_event(receive_records(sqs, url)), FakeContext())
    assert ran == [0, 1]
    assert len(made) == 1


def test_an_unknown_event_source_is_a_clear_error(sqs: SQSClient, url: str) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def work() -> None: ...

    app = make_app(jobs)
    other = create_queue(sqs, "someone-elses")
    sqs.send_message(QueueUrl=other, MessageBody="{}")
    records = receive_records(sqs, other)
    handler = make_handler(app, check_mapping=False)
    with pytest.raises(UnknownEventSource, match=r"someone-elses.*SQS_JOBS_QUEUES"):
        handler(lambda_event(records), FakeContext())
    with pytest.raises(ValueError, match="SQS event source mapping"):
        handler({"detail-type": "Scheduled Event"}, FakeContext())
    assert queue_arn(sqs, url).endswith(NAME)


class FakeLambda:
    def __init__(self, response_types: list[str]) -> None:
        self.response_types = response_types
        self.calls: list[dict[str, t.Any]] = []

    def list_event_source_mappings(self, **kw: t.Any) -> dict[str, t.Any]:
        self.calls.append(kw)
        return {
            "EventSourceMappings": [
                {"UUID": "m-1", "FunctionResponseTypes": self.response_types}
            ]
        }


@pytest.mark.parametrize(
    ("types", "warned"), [([], True), (["ReportBatchItemFailures"], False)]
)
def test_a_mapping_without_report_batch_item_failures_is_warned_of_once(
    sqs: SQSClient,
    url: str,
    log_events: list[EventDict],
    types: list[str],
    warned: bool,
) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def broken() -> None:
        raise RuntimeError("boom")

    app = make_app(jobs)
    client = FakeLambda(types)
    handler = make_handler(app, lambda_client=client)
    for _ in range(2):
        enqueue(app, jobs, "broken")
        handler(lambda_event(receive_records(sqs, url)), FakeContext())
    assert len(client.calls) == 1
    assert client.calls[0]["FunctionName"] == "jobs-function"
    warnings = [e for e in log_events if e["event"] == "lambda_batch_failures_ignored"]
    assert len(warnings) == (1 if warned else 0)


def test_job_records_are_written_and_a_redelivered_idempotent_job_is_a_duplicate(
    sqs: SQSClient, url: str, tmp_path: t.Any
) -> None:
    jobs = SQSJobs()
    runs: list[str] = []

    @jobs.task(idempotent=True)
    def charge(order: str) -> None:
        runs.append(order)

    app = make_app(jobs, SQS_JOBS_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}")
    jobs.store(app).create_tables()
    with app.app_context():
        job_id = charge.enqueue(order="o-1").job_id
    records = receive_records(sqs, url)
    handler = make_handler(app, check_mapping=False)
    assert handler(lambda_event(records), FakeContext()) == {"batchItemFailures": []}
    record = jobs.get_job(job_id, app=app)
    assert record is not None
    assert record.status == "succeeded"
    # The mapping's delete was lost: the same message comes again.
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=records[0]["receiptHandle"], VisibilityTimeout=0
    )
    again = receive_records(sqs, url)
    assert handler(lambda_event(again), FakeContext()) == {"batchItemFailures": []}
    assert runs == ["o-1"]


def test_system_exit_from_a_handler_fails_the_invocation(
    sqs: SQSClient, url: str
) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def leave() -> None:
        raise SystemExit(3)

    app = make_app(jobs)
    enqueue(app, jobs, "leave")
    with pytest.raises(SystemExit):
        invoke(app, sqs, url)


def test_a_unique_job_run_on_lambda_frees_its_key(
    sqs: SQSClient, url: str, tmp_path: t.Any
) -> None:
    jobs = SQSJobs()

    @jobs.task()
    def report(day: str) -> None: ...

    app = make_app(jobs, SQS_JOBS_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}")
    jobs.store(app).create_tables()
    with app.app_context():
        first = report.options(unique=True).enqueue(day="d-1")
        held = report.options(unique=True).enqueue(day="d-1")
    assert not first.duplicate
    assert held.duplicate
    handler = make_handler(app, check_mapping=False)
    assert handler(lambda_event(receive_records(sqs, url)), FakeContext()) == {
        "batchItemFailures": []
    }
    with app.app_context():
        again = report.options(unique=True).enqueue(day="d-1")
    assert not again.duplicate
