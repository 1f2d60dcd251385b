"""Claiming ticks in a DynamoDB store: pending, sent, and taking over stale claims.

The worker puts the tick item (``pk = schedule#<name>``, ``sk = tick#<tick>``)
as ``pending`` with a condition that it does not exist, sends the job, then
marks it ``sent``. A claim still ``pending`` after :data:`STALE_AFTER_SECONDS`
(its worker died between the claim and the send) is taken over by another
worker with a conditional update and sent again, with the same job id.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import time
import typing as t

import structlog
from botocore.exceptions import ClientError
from flask import Flask

from ..engine.sqs import aws_error_code
from . import _claims as claims
from ._claims import send
from ._schedule import Schedule
from ._schedule import tick_text

if t.TYPE_CHECKING:
    from ..engine import QueueGroup
    from ..store.dynamodb import DynamoDBStore

log = structlog.get_logger(__name__)

#: A claim still ``pending`` after this long is another worker's to send.
STALE_AFTER_SECONDS = 60.0


class DynamoClaims:
    """A conditional put of the tick as ``pending``, the send, then ``sent``."""

    def __init__(
        self,
        queues: QueueGroup,
        app: Flask,
        store: DynamoDBStore,
        schedules: cabc.Mapping[str, Schedule],
    ) -> None:
        self.queues = queues
        self.app = app
        self.schedules = schedules
        self.store = store
        #: (schedule name, tick) -> when to look at its claim again.
        self._watched: dict[tuple[str, dt.datetime], float] = {}

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        job_id = schedule.tick_job_id(tick)
        claimed_at = time.time()
        item = {
            **_key(schedule, tick),
            "status": {"S": "pending"},
            "job_id": {"S": job_id},
            "claimed_at": {"N": repr(claimed_at)},
            "expires_at_epoch": {
                "N": str(int((tick + claims.TICK_RETENTION).timestamp()))
            },
        }
        self._watched[(schedule.name, tick)] = claimed_at + STALE_AFTER_SECONDS
        try:
            self.store.client.put_item(
                TableName=self.store.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if aws_error_code(exc) != "ConditionalCheckFailedException":
                raise
            return None
        self._send_claimed(schedule, tick)
        return job_id

    def _send_claimed(self, schedule: Schedule, tick: dt.datetime) -> None:
        claims.after_claim()
        send(self.queues, self.app, schedule, tick)
        self.store.client.update_item(
            TableName=self.store.table_name,
            Key=_key(schedule, tick),
            UpdateExpression="SET #s = :sent",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":sent": {"S": "sent"}},
        )
        self._watched.pop((schedule.name, tick), None)

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        response = self.store.client.query(
            TableName=self.store.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :tick)",
            ExpressionAttributeValues={
                ":pk": {"S": _partition(schedule)},
                ":tick": {"S": "tick#"},
            },
            ScanIndexForward=False,
            Limit=1,
        )
        items = response.get("Items", [])
        if not items:
            return None
        tick = _tick_of(items[0]["sk"]["S"])
        # A worker may have died holding this claim: look at it now.
        self._watched.setdefault((schedule.name, tick), 0.0)
        return tick

    def recover(self, now: float) -> float | None:
        for (name, tick), due in sorted(self._watched.items()):
            schedule = self.schedules.get(name)
            if due > now or schedule is None:
                continue
            self._watched.pop((name, tick))
            try:
                self._recover_one(schedule, tick, now)
            except Exception:
                log.exception(
                    "schedule_recovery_failed", schedule=name, tick=tick_text(tick)
                )
                self._watched[(name, tick)] = now + STALE_AFTER_SECONDS
        return min(self._watched.values(), default=None)

    def _recover_one(self, schedule: Schedule, tick: dt.datetime, now: float) -> None:
        client, table = self.store.client, self.store.table_name
        item = client.get_item(
            TableName=table, Key=_key(schedule, tick), ConsistentRead=True
        ).get("Item")
        if item is None or item["status"]["S"] != "pending":
            return
        claimed_at = float(item["claimed_at"]["N"])
        if claimed_at + STALE_AFTER_SECONDS > now:
            self._watched[(schedule.name, tick)] = claimed_at + STALE_AFTER_SECONDS
            return
        try:
            client.update_item(
                TableName=table,
                Key=_key(schedule, tick),
                UpdateExpression="SET claimed_at = :now",
                ConditionExpression="#s = :pending AND claimed_at = :then",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":now": {"N": repr(now)},
                    ":then": item["claimed_at"],
                    ":pending": {"S": "pending"},
                },
            )
        except ClientError as exc:
            if aws_error_code(exc) != "ConditionalCheckFailedException":
                raise
            return
        self._watched[(schedule.name, tick)] = now + STALE_AFTER_SECONDS
        self._send_claimed(schedule, tick)
        log.info(
            "schedule_fired",
            schedule=schedule.name,
            tick=tick_text(tick),
            job_id=schedule.tick_job_id(tick),
            recovered=True,
        )


def _partition(schedule: Schedule) -> str:
    return f"schedule#{schedule.name}"


def _key(schedule: Schedule, tick: dt.datetime) -> dict[str, dict[str, str]]:
    return {"pk": {"S": _partition(schedule)}, "sk": {"S": f"tick#{tick_text(tick)}"}}


def _tick_of(sort_key: str) -> dt.datetime:
    return dt.datetime.strptime(
        sort_key.removeprefix("tick#"), "%Y-%m-%dT%H:%M:%SZ"
    ).replace(tzinfo=dt.UTC)
