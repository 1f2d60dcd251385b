"""Live workers in the DynamoDB store's table: ``pk = "workers"``, ``sk = <worker_id>``.

The workers' pruning deletes a row not refreshed for
``SQS_JOBS_LOST_WORKER_RETENTION_SECONDS``; each row also expires (TTL) a week
after its last refresh, a backstop for a fleet that no longer runs.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import typing as t

from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code
from .. import model as r
from ._record_items import epoch_value
from ._record_items import n_value
from ._record_items import s_value
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

#: How long a worker's row outlives its last refresh before TTL deletes it.
WORKER_TTL_SECONDS = 7 * 86400


class DynamoDBWorkerRegistry:
    """The live workers (a ``WorkerRegistry``) in a :class:`DynamoDBStore`'s table.

    All workers share one partition (``pk = "workers"``), one item each.
    Each item is written only by its own worker's presence thread, every 15
    seconds: hundreds of workers make a few dozen writes a second to that
    partition, well under DynamoDB's per-partition limit. Read by the
    dashboard and ``flask sqs-jobs workers``.
    """

    def __init__(self, client: t.Any, table: str) -> None:
        self._client = client
        self._table = table

    def register(self, worker: r.WorkerRecord) -> None:
        """Put the worker's item, replacing any: one unconditional ``PutItem``."""
        self._client.put_item(
            TableName=self._table,
            Item={
                **_worker_key(worker.worker_id),
                "host": s_value(worker.host),
                "pid": n_value(worker.pid),
                "queues": s_value(json.dumps(list(worker.queues))),
                "concurrency": n_value(worker.concurrency),
                "busy_slots": n_value(worker.busy_slots),
                "started_at": s_value(worker.started_at.isoformat()),
                "last_seen_at": s_value(worker.last_seen_at.isoformat()),
                "version": s_value(worker.version),
                TTL_ATTRIBUTE: epoch_value(worker.last_seen_at, WORKER_TTL_SECONDS),
            },
        )

    def refresh(self, worker_id: str, busy_slots: int, at: dt.datetime) -> bool:
        """Update the item and its TTL; False when it is gone (TTL or removed).

        One ``UpdateItem`` conditional on the item existing, so a refresh
        never recreates a partial item; the caller registers again.

        :raises botocore.exceptions.ClientError: any other failure; the
            presence service logs and counts it, and tries again next time.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_worker_key(worker_id),
                UpdateExpression="SET busy_slots = :b, last_seen_at = :at, #ttl = :e",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#pk": PARTITION_KEY, "#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":b": n_value(busy_slots),
                    ":at": s_value(at.isoformat()),
                    ":e": epoch_value(at, WORKER_TTL_SECONDS),
                },
            )
        except ClientError as exc:
            if aws_error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def remove(self, worker_id: str) -> None:
        """Delete the worker's item (one ``DeleteItem``), at a graceful stop."""
        self._client.delete_item(TableName=self._table, Key=_worker_key(worker_id))

    def prune_lost(self, older_than: dt.datetime) -> int:
        """Delete the items not refreshed since ``older_than``; return how many.

        One ``Query`` of the partition (every worker's item: hundreds at
        most) and one ``DeleteItem`` per lost worker, each conditional on the
        item not having been refreshed since it was read.
        """
        deleted = 0
        for worker in self.list():
            if worker.last_seen_at >= older_than:
                continue
            try:
                self._client.delete_item(
                    TableName=self._table,
                    Key=_worker_key(worker.worker_id),
                    ConditionExpression="last_seen_at = :seen",
                    ExpressionAttributeValues={
                        ":seen": s_value(worker.last_seen_at.isoformat())
                    },
                )
            except ClientError as exc:
                if aws_error_code(exc) == "ConditionalCheckFailedException":
                    continue  # refreshed meanwhile, or deleted by another worker
                raise
            deleted += 1
        return deleted

    def list(self) -> list[r.WorkerRecord]:
        """Every worker's item, oldest first.

        A strongly consistent ``Query`` of the partition, one request per
        1 MB page. Items of killed workers stay until TTL deletes them (up to
        a day, and TTL may lag): the caller tells live from lost by
        ``last_seen_at``.
        """
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PARTITION_KEY},
            ExpressionAttributeValues={":pk": s_value("workers")},
            ConsistentRead=True,
        )
        workers = [_worker_record(i) for page in pages for i in page.get("Items", [])]
        return sorted(workers, key=lambda w: (w.started_at, w.worker_id))


def _worker_key(worker_id: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: s_value("workers"), SORT_KEY: s_value(worker_id)}


def _worker_record(item: cabc.Mapping[str, t.Any]) -> r.WorkerRecord:
    return r.WorkerRecord(
        worker_id=item[SORT_KEY]["S"],
        host=item["host"]["S"],
        pid=int(item["pid"]["N"]),
        queues=tuple(json.loads(item["queues"]["S"])),
        concurrency=int(item["concurrency"]["N"]),
        busy_slots=int(item["busy_slots"]["N"]),
        started_at=dt.datetime.fromisoformat(item["started_at"]["S"]),
        last_seen_at=dt.datetime.fromisoformat(item["last_seen_at"]["S"]),
        version=item["version"]["S"],
    )
