"""Unique jobs' keys in the DynamoDB store's table, with conditional writes only.

One item per held key: ``pk = "unique#<key>"``, ``sk = "unique"``. A take is
a PutItem that succeeds only when no item stands there or the one that does
is past its ``expires_at``; when the condition fails DynamoDB returns the
item in the way (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which
names the holder without another read. A release is a DeleteItem
conditional on the releasing job holding the key.

Times are the caller's clock (``time.time()``): keep clocks in sync. Items
also carry the table's TTL attribute, so DynamoDB removes expired keys in
its own time; the conditions never rely on it.
"""

from __future__ import annotations

import collections.abc as cabc
import math
import time
import typing as t

from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

#: The sort key of a unique key's item.
ITEM_SORT_KEY = "unique"
_TAKE_CONDITION = f"attribute_not_exists({PARTITION_KEY}) OR expires_at <= :now"
_HELD_BY = "job_id = :job_id"
#: A take whose blocking item vanished before it could be read tries again.
_TAKE_ATTEMPTS = 5


class DynamoDBUniqueKeys:
    """The engine's ``UniqueKeys`` in a DynamoDB table.

    Made by :meth:`DynamoDBStore.unique_keys`. The ``session`` arguments are
    ignored: DynamoDB writes join no SQL transaction (the outbox, and so
    ``session=``, needs a SQL store). Each call is one conditional request,
    safe from any number of threads and processes at once.
    """

    def __init__(
        self,
        client: t.Any,
        table_name: str,
        *,
        clock: cabc.Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def take(
        self, key: str, job_id: str, *, hold_seconds: float, session: t.Any = None
    ) -> str | None:
        """Take ``key`` for ``job_id``; None when taken, else the holder's job id.

        :raises RuntimeError: the item changed under 5 attempts in a row.
        """
        item_key = _item_key(key)
        for _ in range(_TAKE_ATTEMPTS):
            now = self._clock()
            until = now + hold_seconds
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item={
                        **item_key,
                        "job_id": {"S": job_id},
                        "expires_at": {"N": f"{until:.6f}"},
                        TTL_ATTRIBUTE: {"N": str(math.ceil(until))},
                        "created_at": {"N": f"{now:.6f}"},
                    },
                    ConditionExpression=_TAKE_CONDITION,
                    ExpressionAttributeValues={":now": {"N": f"{now:.6f}"}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if aws_error_code(exc) != "ConditionalCheckFailedException":
                    raise
                old = t.cast(t.Any, exc.response).get("Item") or self._read(item_key)
                if old is not None:
                    return str(old["job_id"]["S"])
                continue
            return None
        raise RuntimeError(
            f"unique key {key!r} kept changing while being taken; gave up after"
            f" {_TAKE_ATTEMPTS} attempts"
        )

    def release(self, key: str, job_id: str, *, session: t.Any = None) -> None:
        """Delete the key's item if ``job_id`` holds it (one conditional DeleteItem)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=_item_key(key),
                ConditionExpression=_HELD_BY,
                ExpressionAttributeValues={":job_id": {"S": job_id}},
            )
        except ClientError as exc:
            if aws_error_code(exc) != "ConditionalCheckFailedException":
                raise

    def _read(self, item_key: dict[str, t.Any]) -> dict[str, t.Any] | None:
        answer = self._client.get_item(
            TableName=self._table, Key=item_key, ConsistentRead=True
        )
        return t.cast("dict[str, t.Any] | None", answer.get("Item"))


def _item_key(key: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: {"S": f"unique#{key}"}, SORT_KEY: {"S": ITEM_SORT_KEY}}
