"""Managed scheduling: one EventBridge Scheduler schedule per periodic job.

Each schedule sends the job's body straight to its SQS queue, so no worker
runs a scheduler (``SQS_JOBS_SCHEDULER = "eventbridge"``). The client is made
the way boto3 makes any (``AWS_ENDPOINT_URL_SCHEDULER`` for a local server),
never from ``SQS_JOBS_ENDPOINT_URL``.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import json
import typing as t

import boto3
from botocore.exceptions import ClientError

from ..engine.model import QueueNotFoundError
from ..engine.sqs import aws_error_code
from ._schedule import Schedule
from ._schedule import SCHEDULED_FOR

if t.TYPE_CHECKING:
    from ..engine import QueueGroup

#: What EventBridge Scheduler puts in a templated target's input at each run:
#: an id per run (kept across its retries) and the run's scheduled time.
EXECUTION_ID = "<aws.scheduler.execution-id>"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: How a schedule that sync made describes itself (then its name).
_DESCRIPTION = "flask-sqs-jobs periodic job"
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

    #: ``create``, ``update``, ``delete``, ``unchanged`` or ``kept`` (a schedule
    #: of the group that ``--prune`` leaves: another app's).
    action: str
    name: str
    params: dict[str, t.Any] = dataclasses.field(default_factory=dict)

    def line(self, dry_run: bool) -> str:
        if self.action == "unchanged":
            return f"{self.name}: unchanged"
        if self.action == "kept":
            return (
                f"{self.name}: kept (another app's: it sends to no queue of this one)"
            )
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
        "Description": f"{_DESCRIPTION} {schedule.name}",
        "Target": target,
    }


def plan(
    schedules: cabc.Mapping[str, Schedule],
    queues: QueueGroup,
    client: t.Any,
    *,
    group: str,
    role_arn: str | None,
    prune: bool,
) -> list[Change]:
    """What a sync changes: a create, update or nothing per schedule, and deletes.

    :param queues: the app's queue group (each schedule's target queue).
    :param client: the EventBridge Scheduler client.
    :param group: the schedule group (``SQS_JOBS_SCHEDULE_GROUP``).
    :param role_arn: ``SQS_JOBS_SCHEDULER_ROLE_ARN``.
    :raises ValueError: the role ARN is missing or a schedule cannot be expressed.
    """
    if role_arn is None:
        raise ValueError(
            "SQS_JOBS_SCHEDULER_ROLE_ARN is not set: EventBridge Scheduler needs a"
            " role it may assume that allows sqs:SendMessage on the queues"
        )
    existing = _existing(client, group)
    changes: list[Change] = []
    for schedule in schedules.values():
        queue = queues.queue(schedule.queue)
        arn = queue.client.get_queue_attributes(
            QueueUrl=queue.url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        try:
            want = desired(schedule, group, role_arn, arn, queue.is_fifo)
        except ValueError as exc:
            raise ValueError(f"schedule {schedule.name!r}: {exc}") from None
        if schedule.name not in existing:
            changes.append(Change("create", schedule.name, want))
            continue
        have = client.get_schedule(GroupName=group, Name=schedule.name)
        same = _managed(have) == _managed(want)
        changes.append(Change("unchanged" if same else "update", schedule.name, want))
    if prune:
        changes += _prunes(client, group, sorted(existing - set(schedules)), queues)
    return changes


def _prunes(
    client: t.Any, group: str, names: list[str], queues: QueueGroup
) -> list[Change]:
    """Delete the group's other schedules that are this app's, keep the rest.

    A schedule is the app's when sync made it (its description says so) and it
    sends to one of the app's queues: apps that share a schedule group (the
    default one, say) never prune each other's schedules.
    """
    if not names:
        return []
    ours = _queue_arns(queues)
    changes = []
    for name in names:
        have = client.get_schedule(GroupName=group, Name=name)
        made_here = str(have.get("Description", "")).startswith(_DESCRIPTION)
        target = (have.get("Target") or {}).get("Arn")
        action = "delete" if made_here and target in ours else "kept"
        changes.append(Change(action, name, {"GroupName": group, "Name": name}))
    return changes


def _queue_arns(queues: QueueGroup) -> set[str]:
    arns = set()
    for _, queue in queues.items():
        try:
            attributes = queue.client.get_queue_attributes(
                QueueUrl=queue.url, AttributeNames=["QueueArn"]
            )
        except QueueNotFoundError:
            continue
        arns.add(attributes["Attributes"]["QueueArn"])
    return arns


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
