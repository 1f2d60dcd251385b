"""Exactly one job per tick: the FIFO, DynamoDB and SQL ways of claiming it."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import boto3
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.periodic import _claims as _schedule_claims
from flask_sqs_jobs.periodic._claims import FifoClaims
from flask_sqs_jobs.periodic._dynamodb_claims import DynamoClaims
from flask_sqs_jobs.periodic._dynamodb_claims import STALE_AFTER_SECONDS
from flask_sqs_jobs.periodic._scheduler import Scheduler
from flask_sqs_jobs.store import DynamoDBStore

from tests.conftest import MakeApp
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

TICK = dt.datetime(2026, 6, 1, 3, tzinfo=dt.UTC)


def received(sqs: SQSClient, url: str) -> list[dict[str, t.Any]]:
    messages: list[dict[str, t.Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            return messages
        messages.extend(t.cast(list[dict[str, t.Any]], batch))


def periodic_app(
    make_app: MakeApp, queue: str, **config: t.Any
) -> tuple[Flask, SQSJobs]:
    jobs = SQSJobs()
    jobs.schedule("nightly", cron="0 3 * * *", job_type="report", payload={"n": 1})
    app = make_app(
        {"SQS_JOBS_QUEUES": {"default": {"name": queue}}, **config}, extension=jobs
    )
    return app, jobs


def test_on_a_fifo_queue_three_workers_sending_one_tick_leave_one_message(
    sqs: SQSClient, make_app: MakeApp
) -> None:
    url = create_queue(sqs, "ticks.fifo", fifo=True)
    app, jobs = periodic_app(make_app, "ticks.fifo")
    schedulers = [
        Scheduler(jobs.schedules.values(), FifoClaims(jobs.queue_group(app), app))
        for _ in range(3)
    ]
    for scheduler in schedulers:
        scheduler.prime(TICK - dt.timedelta(seconds=1))
        scheduler.run_due(TICK)

    [message] = received(sqs, url)
    assert json.loads(message["Body"]) == {
        "job_type": "report",
        "payload": {"n": 1},
        "job_id": "nightly:2026-06-01T03:00:00Z",
    }
    assert (
        message["Attributes"]["MessageDeduplicationId"]
        == "nightly:2026-06-01T03:00:00Z"
    )
    assert message["Attributes"]["MessageGroupId"] == "nightly"
    assert message["MessageAttributes"]["scheduled_for"]["StringValue"] == (
        "2026-06-01T03:00:00.000Z"
    )


def test_without_a_store_a_standard_queue_stops_the_worker_with_exit_2(
    sqs: SQSClient, make_app: MakeApp
) -> None:
    create_queue(sqs, "standard")
    app, jobs = periodic_app(make_app, "standard")
    jobs.handler("report")(lambda payload: None)
    result = app.test_cli_runner().invoke(args=["sqs-worker"])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert "schedule 'nightly'" in line
    assert "SQS_JOBS_STORE_URL" in line
    assert "FIFO" in line
    assert 'SQS_JOBS_SCHEDULER = "eventbridge"' in line


@pytest.mark.parametrize(
    ("queue", "processes", "message"),
    [
        ("standard", "2", "is not FIFO and no job store is configured"),
        (
            "elsewhere",
            "1",
            "targets queue 'elsewhere', which is not in SQS_JOBS_QUEUES",
        ),
    ],
)
def test_a_schedule_workers_cannot_run_is_refused_before_any_process_starts(
    sqs: SQSClient, make_app: MakeApp, queue: str, processes: str, message: str
) -> None:
    create_queue(sqs, "standard")
    jobs = SQSJobs()
    jobs.schedule("nightly", cron="0 3 * * *", queue=queue)
    jobs.handler("nightly")(lambda payload: None)
    app = make_app(
        {"SQS_JOBS_QUEUES": {"standard": {"name": "standard"}}}, extension=jobs
    )
    result = app.test_cli_runner().invoke(args=["sqs-worker", "--processes", processes])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_with_the_eventbridge_scheduler_workers_run_no_scheduler(
    sqs: SQSClient, make_app: MakeApp
) -> None:
    from flask_sqs_jobs.commands._services import worker_services
    from flask_sqs_jobs.commands._worker import WorkerOptions

    create_queue(sqs, "standard")
    app, jobs = periodic_app(make_app, "standard", SQS_JOBS_SCHEDULER="eventbridge")
    options = WorkerOptions(
        queue_names=(),
        concurrency=1,
        idle_wait=None,
        shutdown_timeout=None,
        health_max_age=60,
    )
    with app.app_context():
        worker = jobs.create_worker(app)
    services = worker_services(app, jobs.parts(app), worker, options)
    assert [s.name for s in services if s.name == "scheduler"] == []


@pytest.fixture
def dynamodb_store(sqs: SQSClient) -> DynamoDBStore:
    store = DynamoDBStore(
        "jobs", boto_client=boto3.client("dynamodb", region_name="us-east-1")
    )
    store.create_tables()
    return store


def tick_item(store: DynamoDBStore) -> dict[str, t.Any]:
    return t.cast(
        dict[str, t.Any],
        store.client.get_item(
            TableName="jobs",
            Key={
                "pk": {"S": "schedule#nightly"},
                "sk": {"S": "tick#2026-06-01T03:00:00Z"},
            },
        )["Item"],
    )


def test_with_dynamodb_one_of_three_workers_claims_and_sends_the_tick(
    sqs: SQSClient, make_app: MakeApp, dynamodb_store: DynamoDBStore
) -> None:
    url = create_queue(sqs, "standard")
    app, jobs = periodic_app(make_app, "standard")
    claims = [
        DynamoClaims(jobs.queue_group(app), app, dynamodb_store, jobs.schedules)
        for _ in range(3)
    ]
    fired = [c.fire(jobs.schedules["nightly"], TICK) for c in claims]

    assert fired == ["nightly:2026-06-01T03:00:00Z", None, None]
    [message] = received(sqs, url)
    assert json.loads(message["Body"])["job_id"] == "nightly:2026-06-01T03:00:00Z"
    assert tick_item(dynamodb_store)["status"] == {"S": "sent"}
    assert claims[1].last_fired(jobs.schedules["nightly"]) == TICK


@pytest.fixture
def left_pending(
    sqs: SQSClient,
    make_app: MakeApp,
    dynamodb_store: DynamoDBStore,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, Flask, SQSJobs]:
    """The tick claimed by a worker that died before sending it: (url, app, jobs)."""
    url = create_queue(sqs, "standard")
    app, jobs = periodic_app(make_app, "standard")
    original = _schedule_claims.after_claim

    def killed() -> None:
        raise SystemExit("killed between the claim and the send")

    monkeypatch.setattr(_schedule_claims, "after_claim", killed)
    with pytest.raises(SystemExit):
        DynamoClaims(jobs.queue_group(app), app, dynamodb_store, jobs.schedules).fire(
            jobs.schedules["nightly"], TICK
        )
    monkeypatch.setattr(_schedule_claims, "after_claim", original)
    return url, app, jobs


def test_with_dynamodb_a_claim_its_worker_never_sent_is_sent_by_another(
    sqs: SQSClient,
    dynamodb_store: DynamoDBStore,
    left_pending: tuple[str, Flask, SQSJobs],
) -> None:
    url, app, jobs = left_pending
    schedule = jobs.schedules["nightly"]
    assert tick_item(dynamodb_store)["status"] == {"S": "pending"}
    assert received(sqs, url) == []

    other = DynamoClaims(jobs.queue_group(app), app, dynamodb_store, jobs.schedules)
    assert other.fire(schedule, TICK) is None  # claimed already
    claimed_at = float(tick_item(dynamodb_store)["claimed_at"]["N"])
    assert other.recover(claimed_at + 1) is not None  # fresh: not yet
    assert received(sqs, url) == []
    assert other.recover(claimed_at + STALE_AFTER_SECONDS + 1) is None

    [message] = received(sqs, url)
    assert json.loads(message["Body"])["job_id"] == "nightly:2026-06-01T03:00:00Z"
    assert tick_item(dynamodb_store)["status"] == {"S": "sent"}


def test_a_restarted_worker_sends_the_latest_claim_left_pending(
    sqs: SQSClient,
    dynamodb_store: DynamoDBStore,
    left_pending: tuple[str, Flask, SQSJobs],
) -> None:
    url, app, jobs = left_pending

    restarted = DynamoClaims(jobs.queue_group(app), app, dynamodb_store, jobs.schedules)
    scheduler = Scheduler(jobs.schedules.values(), restarted)
    scheduler.prime(TICK + dt.timedelta(minutes=5))
    claimed_at = float(tick_item(dynamodb_store)["claimed_at"]["N"])
    restarted.recover(claimed_at + STALE_AFTER_SECONDS + 1)
    assert len(received(sqs, url)) == 1


def test_with_a_sql_store_the_tick_and_its_outbox_row_commit_together(
    sqs: SQSClient, make_app: MakeApp, store_url: str
) -> None:
    pytest.importorskip(
        "flask_sqs_jobs.store.outbox._write", reason="outbox not available yet"
    )
    import sqlalchemy as sa
    from flask_sqs_jobs.periodic._claims import SqlClaims
    from flask_sqs_jobs.store.sql._tables import outbox
    from flask_sqs_jobs.store.sql._tables import schedule_ticks

    create_queue(sqs, "standard")
    app, jobs = periodic_app(make_app, "standard", SQS_JOBS_STORE_URL=store_url)
    store = t.cast(t.Any, jobs.store(app))
    store.create_tables()
    claims = [SqlClaims(jobs.queue_group(app), app, store) for _ in range(3)]
    fired = [c.fire(jobs.schedules["nightly"], TICK) for c in claims]
    assert fired == ["nightly:2026-06-01T03:00:00Z", None, None]
    with store.engine.connect() as connection:
        ticks = connection.execute(sa.select(schedule_ticks.c.job_id)).scalars().all()
        rows = connection.execute(sa.select(outbox.c.job_id)).scalars().all()
    assert ticks == ["nightly:2026-06-01T03:00:00Z"]
    # Sent at once after the commit, or still waiting for the relay: one job.
    assert rows in ([], ["nightly:2026-06-01T03:00:00Z"])
    assert claims[2].last_fired(jobs.schedules["nightly"]) == TICK
