"""Job records and live workers in the DynamoDB store's single table.

- A job's record: ``pk = "job#<job_id>"``, ``sk = "record"``, updated with a
  condition that refuses an older write (attempt, then status rank).
- For listing, each transition also puts ``pk = "jobs#<YYYYMMDDHH>"``,
  ``sk = "<updated_at>#<job_id>"`` in the same ``TransactWriteItems`` call:
  one request per transition, two write units.
- Workers: ``pk = "workers"``, ``sk = <worker_id>``.

Every item carries ``expires_at_epoch``, so DynamoDB's TTL prunes them.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import typing as t

from botocore.exceptions import ClientError

from . import _records as r
from ._dynamodb import PARTITION_KEY
from ._dynamodb import SORT_KEY
from ._dynamodb import TTL_ATTRIBUTE

#: How long a worker's row outlives its last refresh before TTL deletes it.
WORKER_TTL_SECONDS = 86400
_TIME_FIELDS = ("enqueued_at", "started_at", "finished_at", "updated_at")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _epoch(at: dt.datetime, seconds: float) -> dict[str, str]:
    return _n(int(at.timestamp() + seconds))


class DynamoDBJobRecords:
    """The job records (a ``JobRecords``) in a :class:`DynamoDBStore`'s table."""

    def __init__(self, client: t.Any, table: str, retention_seconds: float) -> None:
        self._client = client
        self._table = table
        self._retention = retention_seconds

    def write(self, events: cabc.Sequence[r.JobEvent]) -> None:
        for event in events:
            self._write(event)

    def _write(self, event: r.JobEvent) -> None:
        update = self._update(event)
        if event.status == r.PROGRESS:
            try:
                self._client.update_item(**update)
            except ClientError as exc:
                if _code(exc) != "ConditionalCheckFailedException":
                    raise
            return
        index = {
            PARTITION_KEY: _s(f"jobs#{event.at.astimezone(dt.UTC):%Y%m%d%H}"),
            SORT_KEY: _s(f"{event.at.isoformat()}#{event.job_id}"),
            "job_id": _s(event.job_id),
            TTL_ATTRIBUTE: _epoch(event.at, self._retention),
        }
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {"Update": update},
                    {"Put": {"TableName": self._table, "Item": index}},
                ]
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if not (reasons and reasons[0].get("Code") == "ConditionalCheckFailed"):
                raise

    def _update(self, event: r.JobEvent) -> dict[str, t.Any]:
        status = event.written_status
        sets: dict[str, t.Any] = {
            "job_id": _s(event.job_id),
            "job_type": _s(event.job_type),
            "queue": _s(event.queue),
            "status": _s(status),
            "status_rank": _n(r.STATUS_RANK[status]),
            "attempts": _n(event.attempts),
            "updated_at": _s(event.at.isoformat()),
            TTL_ATTRIBUTE: _epoch(event.at, self._retention),
        }
        if_missing: dict[str, t.Any] = {}
        removes: list[str] = []
        if event.enqueued_at is not None:
            if_missing["enqueued_at"] = _s(event.enqueued_at.isoformat())
        if event.status == r.PROGRESS:
            sets["progress"] = _n(float(event.progress or 0.0))
            if event.progress_message is None:
                removes.append("progress_message")
            else:
                sets["progress_message"] = _s(event.progress_message)
        elif status == r.RUNNING:
            if event.started_at is not None:
                sets["started_at"] = _s(event.started_at.isoformat())
            removes += [
                "finished_at",
                "result",
                "error",
                "progress",
                "progress_message",
            ]
        elif status != r.QUEUED:
            if event.started_at is not None:
                if_missing["started_at"] = _s(event.started_at.isoformat())
            for column in ("finished_at", "result", "error"):
                given = getattr(event, column)
                if given is None:
                    removes.append(column)
                else:
                    sets[column] = _s(
                        given.isoformat() if isinstance(given, dt.datetime) else given
                    )
        names: dict[str, str] = {}
        values: dict[str, t.Any] = {}

        def name(attribute: str) -> str:
            names[f"#{attribute}"] = attribute
            return f"#{attribute}"

        def value(key: str, item: t.Any) -> str:
            values[f":{key}"] = item
            return f":{key}"

        clauses = [f"{name(k)} = {value(k, v)}" for k, v in sets.items()]
        clauses += [
            f"{name(k)} = if_not_exists({name(k)}, {value(k, v)})"
            for k, v in if_missing.items()
        ]
        expression = "SET " + ", ".join(clauses)
        if removes:
            expression += " REMOVE " + ", ".join(name(k) for k in removes)
        condition = (
            f"attribute_not_exists({name(PARTITION_KEY)})"
            f" OR {name('attempts')} < :attempts"
            f" OR ({name('attempts')} = :attempts"
            f" AND {name('status_rank')} <= :status_rank)"
        )
        if event.status in r.RESTARTS:
            condition += (
                f" OR {name('status')} IN"
                f" ({value('deferred', _s(r.DEFERRED))},"
                f" {value('dead', _s(r.DEAD_LETTERED))})"
            )
        return {
            "TableName": self._table,
            "Key": _job_key(event.job_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def get(self, job_id: str) -> r.JobRecord | None:
        item = self._client.get_item(
            TableName=self._table, Key=_job_key(job_id), ConsistentRead=True
        ).get("Item")
        return None if item is None else _job_record(item)

    def recent(
        self, limit: int = 50, *, status: str | None = None, queue: str | None = None
    ) -> list[r.JobRecord]:
        r.check_status(status)
        now = dt.datetime.now(dt.UTC)
        found: list[r.JobRecord] = []
        seen: set[str] = set()
        for hours in range(int(self._retention // 3600) + 2):
            hour = now - dt.timedelta(hours=hours)
            ids = [i for i in self._ids_of_hour(hour) if i not in seen]
            seen.update(ids)
            for record in self._records(ids):
                if (status is None or record.status == status) and (
                    queue is None or record.queue == queue
                ):
                    found.append(record)
                    if len(found) >= limit:
                        return found
        return found

    def _ids_of_hour(self, hour: dt.datetime) -> list[str]:
        ids: list[str] = []
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PARTITION_KEY},
            ExpressionAttributeValues={":pk": _s(f"jobs#{hour:%Y%m%d%H}")},
            ScanIndexForward=False,
        )
        for page in pages:
            for item in page.get("Items", []):
                job_id = item["job_id"]["S"]
                if job_id not in ids:
                    ids.append(job_id)
        return ids

    def _records(self, ids: list[str]) -> list[r.JobRecord]:
        """The records of ``ids``, in the same order (missing ones left out)."""
        by_id: dict[str, r.JobRecord] = {}
        for start in range(0, len(ids), 100):
            keys = [_job_key(i) for i in ids[start : start + 100]]
            while keys:
                response = self._client.batch_get_item(
                    RequestItems={self._table: {"Keys": keys}}
                )
                for item in response["Responses"].get(self._table, []):
                    record = _job_record(item)
                    by_id[record.job_id] = record
                keys = (
                    response.get("UnprocessedKeys", {})
                    .get(self._table, {})
                    .get("Keys", [])
                )
        return [by_id[i] for i in ids if i in by_id]

    def prune(self, older_than: dt.datetime) -> int:
        """Nothing to do: DynamoDB's TTL deletes expired records."""
        return 0


class DynamoDBWorkerRegistry:
    """The live workers (a ``WorkerRegistry``) in a :class:`DynamoDBStore`'s table."""

    def __init__(self, client: t.Any, table: str) -> None:
        self._client = client
        self._table = table

    def register(self, worker: r.WorkerRecord) -> None:
        self._client.put_item(
            TableName=self._table,
            Item={
                **_worker_key(worker.worker_id),
                "host": _s(worker.host),
                "pid": _n(worker.pid),
                "queues": _s(json.dumps(list(worker.queues))),
                "concurrency": _n(worker.concurrency),
                "busy_slots": _n(worker.busy_slots),
                "started_at": _s(worker.started_at.isoformat()),
                "last_seen_at": _s(worker.last_seen_at.isoformat()),
                "version": _s(worker.version),
                TTL_ATTRIBUTE: _epoch(worker.last_seen_at, WORKER_TTL_SECONDS),
            },
        )

    def refresh(self, worker_id: str, busy_slots: int, at: dt.datetime) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_worker_key(worker_id),
                UpdateExpression="SET busy_slots = :b, last_seen_at = :at, #ttl = :e",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#pk": PARTITION_KEY, "#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":b": _n(busy_slots),
                    ":at": _s(at.isoformat()),
                    ":e": _epoch(at, WORKER_TTL_SECONDS),
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def remove(self, worker_id: str) -> None:
        self._client.delete_item(TableName=self._table, Key=_worker_key(worker_id))

    def list(self) -> list[r.WorkerRecord]:
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PARTITION_KEY},
            ExpressionAttributeValues={":pk": _s("workers")},
            ConsistentRead=True,
        )
        workers = [_worker_record(i) for page in pages for i in page.get("Items", [])]
        return sorted(workers, key=lambda w: (w.started_at, w.worker_id))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _job_key(job_id: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: _s(f"job#{job_id}"), SORT_KEY: _s("record")}


def _worker_key(worker_id: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: _s("workers"), SORT_KEY: _s(worker_id)}


def _text(item: cabc.Mapping[str, t.Any], name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def _time(item: cabc.Mapping[str, t.Any], name: str) -> dt.datetime | None:
    text = _text(item, name)
    return None if text is None else dt.datetime.fromisoformat(text)


def _job_record(item: cabc.Mapping[str, t.Any]) -> r.JobRecord:
    result = _text(item, "result")
    progress = item.get("progress")
    times = {name: _time(item, name) for name in _TIME_FIELDS}
    return r.JobRecord(
        job_id=item["job_id"]["S"],
        job_type=item["job_type"]["S"],
        queue=item["queue"]["S"],
        status=item["status"]["S"],
        attempts=int(item["attempts"]["N"]),
        result=None if result is None else json.loads(result),
        error=_text(item, "error"),
        progress=None if progress is None else float(progress["N"]),
        progress_message=_text(item, "progress_message"),
        **times,
    )


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
