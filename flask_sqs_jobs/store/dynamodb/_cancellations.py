"""Tombstones of cancelled jobs in the DynamoDB store's table.

A tombstone is the item ``pk = "job#<job_id>"``, ``sk = "cancelled"``: in the
partition of the job's record. A cancel is one ``PutItem`` conditional on the
item being absent; workers read tombstones with ``BatchGetItem``, 100 keys a
request. DynamoDB's TTL deletes a tombstone after the retention.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code
from ..model import MAX_READ_BATCH
from ..model import TOMBSTONE_RETENTION_SECONDS
from ._record_items import epoch_value
from ._record_items import s_value
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

_SORT_VALUE = "cancelled"


class DynamoDBCancellations:
    """The store's ``Cancellations`` in a :class:`DynamoDBStore`'s table.

    Made by :meth:`DynamoDBStore.cancellations`; called from web processes,
    the CLI and workers' threads with no lock held (the client is
    thread-safe; each call stands alone).
    """

    def __init__(self, client: t.Any, table: str) -> None:
        self._client = client
        self._table = table

    def cancel(self, job_id: str) -> bool:
        """Write ``job_id``'s tombstone unless it has one; True when written now."""
        now = dt.datetime.now(dt.UTC)
        item = {
            **_key(job_id),
            "job_id": s_value(job_id),
            "cancelled_at": s_value(now.isoformat()),
            TTL_ATTRIBUTE: epoch_value(now, TOMBSTONE_RETENTION_SECONDS),
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": PARTITION_KEY},
            )
        except ClientError as exc:
            if aws_error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def cancelled(self, job_ids: cabc.Collection[str]) -> set[str]:
        """The ids among ``job_ids`` that have a tombstone."""
        ids = list(dict.fromkeys(job_ids))
        found: set[str] = set()
        for start in range(0, len(ids), MAX_READ_BATCH):
            keys = [_key(i) for i in ids[start : start + MAX_READ_BATCH]]
            while keys:
                response = self._client.batch_get_item(
                    RequestItems={
                        self._table: {"Keys": keys, "ProjectionExpression": "job_id"}
                    }
                )
                for item in response["Responses"].get(self._table, []):
                    found.add(item["job_id"]["S"])
                keys = (
                    response.get("UnprocessedKeys", {})
                    .get(self._table, {})
                    .get("Keys", [])
                )
        return found


def _key(job_id: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: s_value(f"job#{job_id}"), SORT_KEY: s_value(_SORT_VALUE)}
