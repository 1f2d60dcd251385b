"""Schedule ticks in the DynamoDB store's table: ``pk = "schedule#<name>"``.

A tick is claimed with a conditional put as ``pending``, marked ``sent`` once
its job is enqueued; a claim left pending too long (its worker died) may be
taken over by another worker, conditionally, so only one does.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code

_CONFLICT = "ConditionalCheckFailedException"


class DynamoDBScheduleTicks:
    """The ticks of periodic jobs, one item per claimed tick.

    Made by :meth:`DynamoDBStore.schedule_ticks` for the periodic
    scheduler's DynamoDB claims; every write is conditional, so any number of
    workers may call it at once. Unlike the SQL ticks, the claim and the job's
    send are not one transaction: a tick is claimed ``pending``, its job sent
    to SQS, then marked ``sent``. A worker that dies between the two leaves the
    tick pending, and another worker takes it over (:meth:`take_over`) once it
    has been pending too long, so a tick's job is sent at least once.

    Errors other than a failed condition raise botocore's ``ClientError``;
    the scheduler logs them and goes on.
    """

    def __init__(self, client: t.Any, table: str) -> None:
        """Keep ``client`` (a boto3 DynamoDB client, thread-safe) and ``table``."""
        self._client = client
        self._table = table

    def claim(
        self,
        schedule: str,
        tick: dt.datetime,
        job_id: str,
        *,
        claimed_at: float,
        keep: dt.timedelta,
    ) -> bool:
        """Claim ``tick`` as pending; False when another worker has it.

        One ``PutItem`` conditional on the item not existing; with hundreds
        of workers firing the same tick, one succeeds and the others get
        ``ConditionalCheckFailedException`` (one write unit each, no retry).
        The item expires (TTL) ``keep`` after the tick.
        """
        item = {
            **_key(schedule, tick),
            "status": {"S": "pending"},
            "job_id": {"S": job_id},
            "claimed_at": {"N": repr(claimed_at)},
            "expires_at_epoch": {"N": str(int((tick + keep).timestamp()))},
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if aws_error_code(exc) != _CONFLICT:
                raise
            return False
        return True

    def mark_sent(self, schedule: str, tick: dt.datetime) -> None:
        """The claimed tick's job is enqueued: one unconditional ``UpdateItem``.

        Called only by the worker that holds the claim, after the send.
        """
        self._client.update_item(
            TableName=self._table,
            Key=_key(schedule, tick),
            UpdateExpression="SET #s = :sent",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":sent": {"S": "sent"}},
        )

    def last_claimed(self, schedule: str) -> dt.datetime | None:
        """The latest tick of ``schedule`` any worker claimed, if any.

        One ``Query`` of the schedule's partition, newest first, ``Limit=1``
        (eventually consistent: a claim made a moment ago may not show yet).
        """
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :tick)",
            ExpressionAttributeValues={
                ":pk": {"S": _partition(schedule)},
                ":tick": {"S": "tick#"},
            },
            ScanIndexForward=False,
            Limit=1,
        )
        items = response.get("Items", [])
        return _tick_of(items[0]["sk"]["S"]) if items else None

    def pending_since(self, schedule: str, tick: dt.datetime) -> float | None:
        """When the tick was claimed, while it is still pending (else None).

        One strongly consistent ``GetItem``; the scheduler compares it with
        its clock to decide whether the claim is abandoned.
        """
        item = self._client.get_item(
            TableName=self._table, Key=_key(schedule, tick), ConsistentRead=True
        ).get("Item")
        if item is None or item["status"]["S"] != "pending":
            return None
        return float(item["claimed_at"]["N"])

    def take_over(
        self, schedule: str, tick: dt.datetime, *, claimed_at: float, now: float
    ) -> bool:
        """Claim a pending tick claimed at ``claimed_at`` for this worker, now.

        False when it changed since (another worker took it, or it was sent).
        One ``UpdateItem`` conditional on the status and the ``claimed_at``
        read by :meth:`pending_since`, so of many workers taking over the same
        tick at once exactly one wins and sends its job.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(schedule, tick),
                UpdateExpression="SET claimed_at = :now",
                ConditionExpression="#s = :pending AND claimed_at = :then",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":now": {"N": repr(now)},
                    ":then": {"N": repr(claimed_at)},
                    ":pending": {"S": "pending"},
                },
            )
        except ClientError as exc:
            if aws_error_code(exc) != _CONFLICT:
                raise
            return False
        return True


def _partition(schedule: str) -> str:
    return f"schedule#{schedule}"


def _key(schedule: str, tick: dt.datetime) -> dict[str, dict[str, str]]:
    return {"pk": {"S": _partition(schedule)}, "sk": {"S": f"tick#{_text(tick)}"}}


def _text(tick: dt.datetime) -> str:
    return tick.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tick_of(sort_key: str) -> dt.datetime:
    return dt.datetime.strptime(
        sort_key.removeprefix("tick#"), "%Y-%m-%dT%H:%M:%SZ"
    ).replace(tzinfo=dt.UTC)
