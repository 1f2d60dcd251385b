"""Job records in the DynamoDB store's single table.

- A job's record: ``pk = "job#<job_id>"``, ``sk = "record"``, updated with a
  condition that refuses a write of another job type, any write over a
  finished record (but a redrive's restart) and an older write (attempt, then
  status rank). A refused write returns the record that refused it
  (``ALL_OLD``), which tells a write of another job type from an older one.
- For listing, each transition also puts ``pk = "jobs#<YYYYMMDDHH>"``,
  ``sk = "<updated_at>#<job_id>"`` in the same ``TransactWriteItems`` call:
  one request per transition, two write units; and, for each of the job's
  tags, ``pk = "tag#<tag>"`` with the same ``sk`` (one write unit more per
  tag), which :mod:`._record_search` queries.
Every item carries ``expires_at_epoch``, so DynamoDB's TTL prunes them.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code
from .. import model as r
from ._record_items import epoch_value
from ._record_items import job_key
from ._record_items import job_record
from ._record_items import n_value
from ._record_items import s_value
from ._record_items import text_of
from ._record_search import find_records
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE


class DynamoDBJobRecords:
    """The job records (a ``JobRecords``) in a :class:`DynamoDBStore`'s table.

    Written by each process's record writer thread, read by ``jobs.get_job``,
    the CLI and the dashboard. No lock: each write's condition decides, so
    hundreds of processes writing the same job at once leave its newest
    transition. :meth:`prune` does nothing; TTL deletes old items.
    """

    def __init__(self, client: t.Any, table: str, retention_seconds: float) -> None:
        self._client = client
        self._table = table
        self._retention = retention_seconds

    def write(self, events: cabc.Sequence[r.JobEvent]) -> list[r.RefusedWrite]:
        """Write ``events`` one by one; return the writes refused for job type.

        Per merged event, one ``UpdateItem`` (progress) or one
        ``TransactWriteItems`` (record and listing entry); no batch is atomic.
        A refusal costs one ``GetItem`` only when DynamoDB returned no item.

        :raises botocore.exceptions.ClientError: any other failure; the events
            before it are written, and the writer counts the whole batch failed.
        """
        refused: list[r.RefusedWrite] = []
        for event in r.merge_events(events):
            standing = self._write(event)
            if standing is not None:
                recorded = text_of(standing, "job_type")
                if recorded is not None and recorded != event.job_type:
                    refused.append(
                        r.RefusedWrite(event.job_id, recorded, event.job_type)
                    )
        return refused

    def _write(self, event: r.JobEvent) -> dict[str, t.Any] | None:
        """Write ``event``; return the record that refused it, if one did."""
        update = self._update(event)
        if event.status == r.PROGRESS:
            try:
                self._client.update_item(**update)
            except ClientError as exc:
                if aws_error_code(exc) != "ConditionalCheckFailedException":
                    raise
                return self._standing(exc.response.get("Item"), event)
            return None
        index = {
            PARTITION_KEY: s_value(f"jobs#{event.at.astimezone(dt.UTC):%Y%m%d%H}"),
            SORT_KEY: s_value(f"{event.at.isoformat()}#{event.job_id}"),
            "job_id": s_value(event.job_id),
            TTL_ATTRIBUTE: epoch_value(event.at, self._retention),
        }
        puts = [index] + [
            {**index, PARTITION_KEY: s_value(f"tag#{tag}")} for tag in event.tags
        ]
        try:
            self._client.transact_write_items(
                TransactItems=[{"Update": update}]
                + [{"Put": {"TableName": self._table, "Item": put}} for put in puts]
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if not (reasons and reasons[0].get("Code") == "ConditionalCheckFailed"):
                raise
            return self._standing(reasons[0].get("Item"), event)
        return None

    def _standing(self, item: t.Any, event: r.JobEvent) -> dict[str, t.Any]:
        """The record that refused ``event``: as returned, else read (consistently)."""
        if item:
            return t.cast(dict[str, t.Any], item)
        found = self._client.get_item(
            TableName=self._table, Key=job_key(event.job_id), ConsistentRead=True
        ).get("Item")
        return t.cast(dict[str, t.Any], found or {})

    def _update(self, event: r.JobEvent) -> dict[str, t.Any]:
        status = event.written_status
        sets: dict[str, t.Any] = {
            "job_id": s_value(event.job_id),
            "job_type": s_value(event.job_type),
            "queue": s_value(event.queue),
            "status": s_value(status),
            "status_rank": n_value(r.STATUS_RANK[status]),
            "attempts": n_value(event.attempts),
            "updated_at": s_value(event.at.isoformat()),
            TTL_ATTRIBUTE: epoch_value(event.at, self._retention),
        }
        if_missing: dict[str, t.Any] = {}
        removes: list[str] = []
        if event.enqueued_at is not None:
            if_missing["enqueued_at"] = s_value(event.enqueued_at.isoformat())
        if event.tags:
            if_missing["tags"] = {"L": [s_value(tag) for tag in event.tags]}
        if event.status == r.PROGRESS:
            sets["progress"] = n_value(float(event.progress or 0.0))
            if event.progress_message is None:
                removes.append("progress_message")
            else:
                sets["progress_message"] = s_value(event.progress_message)
        elif status == r.RUNNING:
            if event.started_at is not None:
                sets["started_at"] = s_value(event.started_at.isoformat())
            removes += ["finished_at", "result", "error", "payload"]
            if event.progress is None:
                removes += ["progress", "progress_message"]
            else:
                self._set_progress(event, sets)
        elif status != r.QUEUED:
            if event.progress is not None:
                self._set_progress(event, sets)
            if event.started_at is not None:
                if_missing["started_at"] = s_value(event.started_at.isoformat())
            for column in ("finished_at", "result", "error", "payload"):
                given = getattr(event, column)
                if given is None:
                    # A duplicate delivery keeps the result of the run it duplicates.
                    if not (column == "result" and status == r.DUPLICATE):
                        removes.append(column)
                else:
                    sets[column] = s_value(
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
        finished = ", ".join(value(each, s_value(each)) for each in sorted(r.FINAL))
        applies = (
            f"(NOT {name('status')} IN ({finished})"
            f" AND ({name('attempts')} < :attempts"
            f" OR ({name('attempts')} = :attempts"
            f" AND {name('status_rank')} <= :status_rank)))"
        )
        if event.may_restart:
            restarting = ", ".join(
                value(each, s_value(each)) for each in sorted(r.RESTARTING)
            )
            applies = f"({applies} OR {name('status')} IN ({restarting}))"
        condition = (
            f"attribute_not_exists({name(PARTITION_KEY)})"
            f" OR ({name('job_type')} = :job_type AND {applies})"
        )
        return {
            "TableName": self._table,
            "Key": job_key(event.job_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    @staticmethod
    def _set_progress(event: r.JobEvent, sets: dict[str, t.Any]) -> None:
        sets["progress"] = n_value(float(event.progress or 0.0))
        if event.progress_message is not None:
            sets["progress_message"] = s_value(event.progress_message)

    def get(self, job_id: str) -> r.JobRecord | None:
        """One strongly consistent ``GetItem``; None when no record was written."""
        item = self._client.get_item(
            TableName=self._table, Key=job_key(job_id), ConsistentRead=True
        ).get("Item")
        return None if item is None else job_record(item)

    def recent(
        self,
        limit: int = 50,
        *,
        status: r.StatusFilter = None,
        queue: str | None = None,
    ) -> list[r.JobRecord]:
        """Newest hour first: a ``Query`` per hour, ``BatchGetItem`` per 100 ids.

        Filtering by status or queue happens after the reads, so a rare
        status may read every hour of the retention before ``limit`` is met.
        """
        statuses = r.check_status(status)
        now = dt.datetime.now(dt.UTC)
        found: list[r.JobRecord] = []
        seen: set[str] = set()
        for hours in range(int(self._retention // 3600) + 2):
            hour = now - dt.timedelta(hours=hours)
            ids = [i for i in self._ids_of_hour(hour) if i not in seen]
            seen.update(ids)
            for record in self.records(ids):
                if (statuses is None or record.status in statuses) and (
                    queue is None or record.queue == queue
                ):
                    found.append(record)
                    if len(found) >= limit:
                        return found
        return found

    def find(self, search: r.JobSearch) -> list[r.JobRecord]:
        """A ``Query`` of the tag's entries, or of each hour's listing in the
        range, newest first, then the records they name (:mod:`._record_search`)."""
        return find_records(self, search, self._retention)

    def finished_per_minute(self, since: dt.datetime) -> list[r.MinuteCount]:
        """Read the listing entries written since ``since`` (one query per hour),
        then the records they name (batches of 100), and count in Python."""
        since = since.astimezone(dt.UTC)
        now = dt.datetime.now(dt.UTC)
        ids: dict[str, None] = {}
        hour = since.replace(minute=0, second=0, microsecond=0)
        while hour <= now:
            ids.update(dict.fromkeys(self._ids_of_hour(hour, since)))
            hour += dt.timedelta(hours=1)
        counts: dict[tuple[dt.datetime, str, str], int] = {}
        for record in self.records(list(ids)):
            if record.finished_at is not None and record.finished_at >= since:
                key = (r.minute_of(record.finished_at), record.queue, record.status)
                counts[key] = counts.get(key, 0) + 1
        return [r.MinuteCount(*key, count) for key, count in counts.items()]

    def _ids_of_hour(
        self, hour: dt.datetime, since: dt.datetime | None = None
    ) -> list[str]:
        """The jobs of an hour's listing entries (written at or after ``since``)."""
        return self.ids_of(f"jobs#{hour:%Y%m%d%H}", since)

    def ids_of(
        self,
        partition: str,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> list[str]:
        """The jobs of a listing partition's entries, newest first, written at
        or after ``since`` and before ``until``."""
        ids: dict[str, None] = {}
        condition = "#pk = :pk"
        names = {"#pk": PARTITION_KEY}
        values = {":pk": s_value(partition)}
        if since is not None or until is not None:
            names["#sk"] = SORT_KEY
            values[":since"] = s_value("" if since is None else since.isoformat())
            values[":until"] = s_value("~" if until is None else until.isoformat())
            condition += " AND #sk BETWEEN :since AND :until"
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
        )
        for page in pages:
            for item in page.get("Items", []):
                ids.setdefault(item["job_id"]["S"])
        return list(ids)

    def records(self, ids: list[str]) -> list[r.JobRecord]:
        """The records of ``ids``, in the same order (missing ones left out)."""
        by_id: dict[str, r.JobRecord] = {}
        for start in range(0, len(ids), 100):
            keys = [job_key(i) for i in ids[start : start + 100]]
            while keys:
                response = self._client.batch_get_item(
                    RequestItems={self._table: {"Keys": keys}}
                )
                for item in response["Responses"].get(self._table, []):
                    record = job_record(item)
                    by_id[record.job_id] = record
                keys = (
                    response.get("UnprocessedKeys", {})
                    .get(self._table, {})
                    .get("Keys", [])
                )
        return [by_id[i] for i in ids if i in by_id]

    def prune(self, older_than: dt.datetime, limit: int | None = None) -> int:
        """Nothing to do: DynamoDB's TTL deletes expired records."""
        return 0
