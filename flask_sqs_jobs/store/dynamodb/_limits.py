"""Limits in the DynamoDB store's table: ``pk = "limit#<name>#<key>"``.

A rate limit is one item (``sk = "bucket"``): its tokens, when they were
counted, and a version. A take (of one token, or of a worker's batch) reads
it (strongly consistent), applies the token bucket's arithmetic, and writes
it back conditional on the version it read; a take that lost the race
reads again. A concurrency limit is one item per slot (``sk = "slot#<n>"``)
with its holder and when its lease ends; a slot is taken by a put
conditional on it being free (no item, no holder, or an ended lease), so a
dead worker's permits come back on their own. Items expire by TTL a day
after their last use. Times are this process's clock: keep the workers'
clocks in sync (NTP).
"""

from __future__ import annotations

import random
import time
import typing as t

from botocore.exceptions import ClientError

from ...engine.flow import BucketState
from ...engine.flow import RateLimit
from ...engine.flow import take_token
from ...engine.sqs import aws_error_code
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

_CONFLICT = "ConditionalCheckFailedException"
#: Conditional writes that lose races try again, at most this many times.
_ATTEMPTS = 10
#: Items are forgotten (TTL) this long after their last write.
_KEEP_SECONDS = 86_400
_BUCKET = "bucket"
_SLOT = "slot#"


def _pk(name: str, key: str) -> dict[str, t.Any]:
    return {"S": f"limit#{len(name)}#{name}#{key}"}


def _conflict(exc: ClientError) -> bool:
    return aws_error_code(exc) == _CONFLICT


class DynamoDBLimits:
    """The engine's ``LimitStore`` in the DynamoDB store's table.

    Made by :meth:`DynamoDBStore.limits`; called on slot threads (and the
    heartbeat's pool) with no lock held: every write is conditional, so any
    number of workers may race. Errors other than a lost race raise
    botocore's ``ClientError``; the gate retries the job.
    """

    def __init__(self, client: t.Any, table: str) -> None:
        """Keep ``client`` (a boto3 DynamoDB client, thread-safe) and ``table``."""
        self._client = client
        self._table = table

    def take_token(self, name: str, key: str, limit: int, per: float) -> float:
        """Take one token of ``(name, key)``: 0, or the seconds until one."""
        taken, wait = self.take_tokens(name, key, limit, per, 1)
        return 0.0 if taken else wait

    def take_tokens(
        self, name: str, key: str, limit: int, per: float, most: int
    ) -> tuple[int, float]:
        """Take up to ``most`` tokens of ``(name, key)``: how many, and the wait."""
        rate = RateLimit(name, limit, per)
        item_key = {PARTITION_KEY: _pk(name, key), SORT_KEY: {"S": _BUCKET}}
        for attempt in range(_ATTEMPTS):
            item = self._client.get_item(
                TableName=self._table, Key=item_key, ConsistentRead=True
            ).get("Item")
            state = None
            if item is not None:
                state = BucketState(
                    float(item["tokens"]["N"]), float(item["updated_at"]["N"])
                )
            now = time.time()
            taken = take_token(rate, state, now, most)
            if not taken.taken:
                return 0, max(taken.retry_after, 1e-6)
            version = 0 if item is None else int(item["version"]["N"])
            written = {
                **item_key,
                "tokens": {"N": repr(taken.state.tokens)},
                "updated_at": {"N": repr(taken.state.updated_at)},
                "version": {"N": str(version + 1)},
                TTL_ATTRIBUTE: {"N": str(int(now) + _KEEP_SECONDS)},
            }
            condition: dict[str, t.Any] = (
                {"ConditionExpression": "attribute_not_exists(pk)"}
                if item is None
                else {
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": {":v": {"N": str(version)}},
                }
            )
            try:
                self._client.put_item(TableName=self._table, Item=written, **condition)
            except ClientError as exc:
                if not _conflict(exc):
                    raise
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                continue
            return taken.count, 0.0
        raise RuntimeError(f"the bucket of limit {name!r} kept changing; gave up")

    def acquire_permit(
        self, name: str, key: str, limit: int, holder: str, lease_seconds: float
    ) -> int | None:
        """Take a free slot of ``(name, key)`` for ``holder``; None: all held."""
        pk = _pk(name, key)
        for _ in range(_ATTEMPTS):
            now = time.time()
            held = self._held_slots(pk, now)
            free = [slot for slot in range(limit) if slot not in held]
            if not free:
                return None
            slot = random.choice(free)
            item = {
                PARTITION_KEY: pk,
                SORT_KEY: {"S": f"{_SLOT}{slot}"},
                "holder": {"S": holder},
                "expires_at": {"N": repr(now + lease_seconds)},
                TTL_ATTRIBUTE: {"N": str(int(now + lease_seconds) + _KEEP_SECONDS)},
            }
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk)"
                    " OR attribute_not_exists(holder) OR expires_at <= :now",
                    ExpressionAttributeValues={":now": {"N": repr(now)}},
                )
            except ClientError as exc:
                if not _conflict(exc):
                    raise
                continue
            return slot
        raise RuntimeError(f"the permits of limit {name!r} kept changing; gave up")

    def _held_slots(self, pk: dict[str, t.Any], now: float) -> set[int]:
        """The slots of ``pk`` whose holder's lease has not ended."""
        held: set[int] = set()
        request: dict[str, t.Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :slot)",
            "ExpressionAttributeValues": {":pk": pk, ":slot": {"S": _SLOT}},
            "ConsistentRead": True,
        }
        while True:
            page = self._client.query(**request)
            for item in page.get("Items", []):
                if "holder" in item and float(item["expires_at"]["N"]) > now:
                    held.add(int(item[SORT_KEY]["S"][len(_SLOT) :]))
            if "LastEvaluatedKey" not in page:
                return held
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def renew_permit(
        self, name: str, key: str, slot: int, holder: str, lease_seconds: float
    ) -> bool:
        """Push the slot's lease on; False when ``holder`` lost it."""
        expires = time.time() + lease_seconds
        return self._update_held(
            name,
            key,
            slot,
            holder,
            "SET expires_at = :e, #ttl = :ttl",
            {
                ":e": {"N": repr(expires)},
                ":ttl": {"N": str(int(expires) + _KEEP_SECONDS)},
            },
        )

    def release_permit(self, name: str, key: str, slot: int, holder: str) -> None:
        """Free the slot if ``holder`` still holds it."""
        self._update_held(name, key, slot, holder, "REMOVE holder", {})

    def _update_held(
        self,
        name: str,
        key: str,
        slot: int,
        holder: str,
        update: str,
        values: dict[str, t.Any],
    ) -> bool:
        names = {"#ttl": TTL_ATTRIBUTE} if "#ttl" in update else {}
        try:
            self._client.update_item(
                TableName=self._table,
                Key={PARTITION_KEY: _pk(name, key), SORT_KEY: {"S": f"{_SLOT}{slot}"}},
                UpdateExpression=update,
                ConditionExpression="holder = :h",
                ExpressionAttributeValues={":h": {"S": holder}, **values},
                **({"ExpressionAttributeNames": names} if names else {}),
            )
        except ClientError as exc:
            if _conflict(exc):
                return False
            raise
        return True
