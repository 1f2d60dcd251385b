"""Managed scheduling: one EventBridge Scheduler schedule per periodic job.

Each schedule sends the job's body straight to its SQS queue, so no worker
runs a scheduler (``SQS_JOBS_SCHEDULER = "eventbridge"``). The client is made
the way boto3 makes any (``AWS_ENDPOINT_URL_SCHEDULER`` for a local server),
never from ``SQS_JOBS_ENDPOINT_URL``.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

import boto3
from botocore.exceptions import ClientError
from flask import Flask

from ..engine.sqs import aws_error_code
from ._schedule import Schedule
from ._schedule import SCHEDULED_FOR

if t.TYPE_CHECKING:
    from .._extension import SQSJobs

#: What EventBridge Scheduler puts in a templated target's input at each run:
#: an id per run (kept across its retries) and the run's scheduled time.
EXECUTION_ID = "<aws.scheduler.execution-id>"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: The keys of a schedule that sync manages (and compares).
_MANAGED = (
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "State",
    "Description",
)
_MANAGED_TARGET = ("Arn", "RoleArn", "Input", "SqsParameters")


@dataclasses.dataclass(frozen=True)
class Change:
    """One thing ``schedules sync`` does (or, with ``--dry-run``, would do)."""

    #: ``create``, ``update``, ``delete`` or ``unchanged``.
    action: str
    name: str
    params: dict[str, t.Any] = dataclasses.field(default_factory=dict)

    def line(self, dry_run: bool) -> str:
        if self.action == "unchanged":
            return f"{self.name}: unchanged"
        done = {"create": "created", "update": "updated", "delete": "deleted"}
        return (
            f"{self.name}: {'would ' + self.action if dry_run else done[self.action]}"
        )


def scheduler_client() -> t.Any:
    """A boto3 EventBridge Scheduler client, configured as boto3 configures any."""
    return boto3.client("scheduler")


def job_input(schedule: Schedule) -> str:
    """The SQS message body each run sends: the wire format, with the run's time."""
    body = {
        "job_type": schedule.job_type,
        "payload": schedule.payload,
        "job_id": f"{schedule.name}.{EXECUTION_ID}",
        SCHEDULED_FOR: SCHEDULED_TIME,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def desired(
    schedule: Schedule, group: str, role_arn: str, queue_arn: str, fifo: bool
) -> dict[str, t.Any]:
    """The CreateSchedule parameters of ``schedule``.

    :raises ValueError: its cron expression has no EventBridge equivalent.
    """
    target: dict[str, t.Any] = {
        "Arn": queue_arn,
        "RoleArn": role_arn,
        "Input": job_input(schedule),
    }
    if fifo:
        target["SqsParameters"] = {"MessageGroupId": schedule.name}
    return {
        "Name": schedule.name,
        "GroupName": group,
        "ScheduleExpression": schedule.expression.eventbridge(),
        "ScheduleExpressionTimezone": schedule.timezone,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "State": "ENABLED",
        "Description": f"flask-sqs-jobs periodic job {schedule.name}",
        "Target": target,
    }


def plan(app: Flask, jobs: SQSJobs, client: t.Any, prune: bool) -> list[Change]:
    """What a sync changes: a create, update or nothing per schedule, and deletes.

    :raises ValueError: the role ARN is missing or a schedule cannot be expressed.
    """
    config = jobs.config(app)
    if config.scheduler_role_arn is None:
        raise ValueError(
            "SQS_JOBS_SCHEDULER_ROLE_ARN is not set: EventBridge Scheduler needs a"
            " role it may assume that allows sqs:SendMessage on the queues"
        )
    group = config.schedule_group
    existing = _existing(client, group)
    changes: list[Change] = []
    for schedule in jobs.schedules.values():
        queue = jobs.queues(app).queue(schedule.queue)
        arn = jobs.client(app).get_queue_attributes(
            QueueUrl=queue.url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        try:
            want = desired(
                schedule, group, config.scheduler_role_arn, arn, queue.is_fifo
            )
        except ValueError as exc:
            raise ValueError(f"schedule {schedule.name!r}: {exc}") from None
        if schedule.name not in existing:
            changes.append(Change("create", schedule.name, want))
            continue
        have = client.get_schedule(GroupName=group, Name=schedule.name)
        same = _managed(have) == _managed(want)
        changes.append(Change("unchanged" if same else "update", schedule.name, want))
    if prune:
        for name in sorted(existing - set(jobs.schedules)):
            changes.append(Change("delete", name, {"GroupName": group, "Name": name}))
    return changes


def apply(client: t.Any, group: str, changes: list[Change]) -> None:
    """Make ``changes`` (creating the schedule group when it is missing)."""
    if any(change.action == "create" for change in changes):
        ensure_group(client, group)
    for change in changes:
        if change.action == "create":
            client.create_schedule(**change.params)
        elif change.action == "update":
            client.update_schedule(**change.params)
        elif change.action == "delete":
            client.delete_schedule(**change.params)


def ensure_group(client: t.Any, group: str) -> bool:
    """Create the schedule group unless it exists; return whether it was created."""
    try:
        client.get_schedule_group(Name=group)
    except ClientError as exc:
        if aws_error_code(exc) != "ResourceNotFoundException":
            raise
        client.create_schedule_group(Name=group)
        return True
    return False


def _existing(client: t.Any, group: str) -> set[str]:
    names: set[str] = set()
    try:
        for page in client.get_paginator("list_schedules").paginate(GroupName=group):
            names.update(item["Name"] for item in page.get("Schedules", []))
    except ClientError as exc:
        if aws_error_code(exc) != "ResourceNotFoundException":
            raise
    return names


def _managed(params: dict[str, t.Any]) -> dict[str, t.Any]:
    target = params.get("Target") or {}
    return {
        **{key: params.get(key) for key in _MANAGED},
        "Target": {key: target.get(key) for key in _MANAGED_TARGET},
    }
