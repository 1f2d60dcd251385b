"""``flask sqs-jobs schedules sync`` against moto_server's EventBridge Scheduler."""

from __future__ import annotations

import json
import typing as t

import boto3
import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from .conftest import MakeQueue
from .conftest import REGION

ROLE = "arn:aws:iam::123456789012:role/scheduler-sends-jobs"


@pytest.fixture
def scheduler(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> t.Any:
    """The scheduler client, and boto3's own endpoint setting pointing at moto."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SCHEDULER", sqs_endpoint)
    return boto3.client("scheduler", region_name=REGION, endpoint_url=sqs_endpoint)


@pytest.fixture
def group(scheduler: t.Any) -> t.Iterator[str]:
    name = f"jobs-{id(scheduler)}"
    yield name
    for page in scheduler.get_paginator("list_schedules").paginate(GroupName=name):
        for item in page["Schedules"]:
            scheduler.delete_schedule(GroupName=name, Name=item["Name"])


def make_app(
    sqs_endpoint: str,
    queues: dict[str, str],
    group: str,
    jobs: SQSJobs,
    role: str | None = ROLE,
) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={k: {"url": v} for k, v in queues.items()},
        SQS_JOBS_ENDPOINT_URL=sqs_endpoint,
        SQS_JOBS_REGION_NAME=REGION,
        SQS_JOBS_SCHEDULE_GROUP=group,
        SQS_JOBS_SCHEDULER_ROLE_ARN=role,
        SQS_JOBS_SCHEDULER="eventbridge",
    )
    jobs.init_app(app)
    return app


def sync(app: Flask, *args: str) -> list[str]:
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "schedules", "sync", *args])
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()


def declared(cron: str = "0 3 * * *") -> SQSJobs:
    jobs = SQSJobs()
    jobs.schedule(
        "nightly_report",
        cron=cron,
        timezone="Europe/Berlin",
        job_type="report",
        payload={"kind": "daily"},
    )
    jobs.schedule("cleanup", cron="*/30 * * * 1-5", queue="fifo")
    return jobs


@pytest.fixture
def queues(make_queue: MakeQueue) -> dict[str, str]:
    return {"default": make_queue("sched"), "fifo": make_queue("sched", fifo=True)}


def test_sync_creates_one_schedule_per_periodic_job_then_changes_nothing(
    sqs_endpoint: str, scheduler: t.Any, group: str, queues: dict[str, str]
) -> None:
    app = make_app(sqs_endpoint, queues, group, declared())

    assert sync(app) == ["nightly_report: created", "cleanup: created"]
    assert scheduler.get_schedule_group(Name=group)["State"] == "ACTIVE"

    nightly = scheduler.get_schedule(GroupName=group, Name="nightly_report")
    assert nightly["ScheduleExpression"] == "cron(0 3 * * ? *)"
    assert nightly["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert nightly["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = nightly["Target"]
    assert target["RoleArn"] == ROLE
    assert target["Arn"].endswith(":" + queues["default"].rsplit("/", 1)[-1])
    assert json.loads(target["Input"]) == {
        "job_type": "report",
        "payload": {"kind": "daily"},
        "job_id": "nightly_report.<aws.scheduler.execution-id>",
        "scheduled_for": "<aws.scheduler.scheduled-time>",
    }
    assert "SqsParameters" not in target
    cleanup = scheduler.get_schedule(GroupName=group, Name="cleanup")
    assert cleanup["ScheduleExpression"] == "cron(0,30 * ? * MON,TUE,WED,THU,FRI *)"
    assert cleanup["Target"]["SqsParameters"] == {"MessageGroupId": "cleanup"}

    assert sync(app) == [
        "nightly_report: unchanged",
        "cleanup: unchanged",
        f"nothing to change: schedule group {group!r} is up to date",
    ]


def test_sync_updates_a_changed_cron_and_prune_deletes_what_the_app_lacks(
    sqs_endpoint: str, scheduler: t.Any, group: str, queues: dict[str, str]
) -> None:
    sync(make_app(sqs_endpoint, queues, group, declared()))
    changed = SQSJobs()
    changed.schedule(
        "nightly_report",
        cron="0 4 * * *",
        timezone="Europe/Berlin",
        job_type="report",
        payload={"kind": "daily"},
    )
    app = make_app(sqs_endpoint, queues, group, changed)

    assert sync(app) == ["nightly_report: updated"]
    nightly = scheduler.get_schedule(GroupName=group, Name="nightly_report")
    assert nightly["ScheduleExpression"] == "cron(0 4 * * ? *)"
    assert scheduler.get_schedule(GroupName=group, Name="cleanup")  # not pruned

    assert sync(app, "--prune") == ["nightly_report: unchanged", "cleanup: deleted"]
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
    assert names == ["nightly_report"]


def test_dry_run_prints_what_it_would_do_and_changes_nothing(
    sqs_endpoint: str, scheduler: t.Any, group: str, queues: dict[str, str]
) -> None:
    sync(make_app(sqs_endpoint, queues, group, declared()))
    app = make_app(sqs_endpoint, queues, group, declared(cron="15 3 * * *"))
    before = scheduler.list_schedules(GroupName=group)["Schedules"]

    assert sync(app, "--dry-run", "--prune") == [
        f"dry run: nothing is changed in schedule group {group!r}",
        "nightly_report: would update",
        "cleanup: unchanged",
    ]
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == before
    nightly = scheduler.get_schedule(GroupName=group, Name="nightly_report")
    assert nightly["ScheduleExpression"] == "cron(0 3 * * ? *)"


def test_sync_without_a_role_exits_2_naming_the_setting(
    sqs_endpoint: str, scheduler: t.Any, group: str, queues: dict[str, str]
) -> None:
    app = make_app(sqs_endpoint, queues, group, declared(), role=None)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "schedules", "sync"])
    assert result.exit_code == 2
    assert "SQS_JOBS_SCHEDULER_ROLE_ARN is not set" in result.output


def test_prune_leaves_the_schedules_of_another_app_in_the_same_group(
    sqs_endpoint: str,
    scheduler: t.Any,
    group: str,
    queues: dict[str, str],
    make_queue: MakeQueue,
) -> None:
    other = SQSJobs()
    other.schedule("invoices", cron="0 6 * * *", job_type="bill")
    other_queues = {"default": make_queue("billing")}
    sync(make_app(sqs_endpoint, other_queues, group, other))
    scheduler.create_schedule(
        GroupName=group,
        Name="by_hand",
        ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:sqs:us-east-1:123456789012:x", "RoleArn": ROLE},
    )
    mine = SQSJobs()
    mine.schedule("nightly_report", cron="0 3 * * *", job_type="report")
    app = make_app(sqs_endpoint, queues, group, mine)

    lines = sync(app, "--prune")

    assert lines[0] == "nightly_report: created"
    assert sorted(lines[1:]) == [
        "by_hand: kept (another app's: it sends to no queue of this one)",
        "invoices: kept (another app's: it sends to no queue of this one)",
    ]
    names = {s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]}
    assert names == {"nightly_report", "invoices", "by_hand"}
