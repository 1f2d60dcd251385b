"""Job records in the DynamoDB store's single table.

- A job's record: ``pk = "job#<job_id>"``, ``sk = "record"``, updated with a
  condition that refuses a write of another job type, any write over a
  finished record (but a redrive's restart) and an older write (attempt, then
  status rank). A refused write returns the record that refused it
  (``ALL_OLD``), which tells a write of another job type from an older one.
- Each transition also puts a listing entry (and one per tag), and a
  transition into a final status adds one to its minute's counter, in the same
  ``TransactWriteItems`` call: one request per transition, two write units per
  item. Entries and counters are sharded by job id (:mod:`._record_listing`);
  as the record's condition decides the whole transaction, a refused write
  lists and counts nothing, and each finish is counted once.
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
from ._record_listing import count_update
from ._record_listing import Listing
from ._record_listing import listing_items
from ._record_search import find_records
from ._record_search import matching_records
from ._schema import PARTITION_KEY
from ._schema import TTL_ATTRIBUTE


class DynamoDBJobRecords:
    """The job records (a ``JobRecords``) in a :class:`DynamoDBStore`'s table.

    Written by each process's record writer thread, read by ``jobs.get_job``,
    the CLI and the dashboard. No lock: each write's condition decides, so
    hundreds of processes writing the same job at once leave its newest
    transition. :meth:`prune` does nothing; TTL deletes old items.

    :param shards: the listing and counter keys per hour (checked by the store).
    """

    def __init__(
        self, client: t.Any, table: str, retention_seconds: float, shards: int
    ) -> None:
        self._client = client
        self._table = table
        self._retention = retention_seconds
        self._shards = shards
        self._listing = Listing(client, table, shards)

    def write(self, events: cabc.Sequence[r.JobEvent]) -> list[r.RefusedWrite]:
        """Write ``events`` one by one; return the writes refused for job type.

        Per merged event, one ``UpdateItem`` (progress) or one
        ``TransactWriteItems`` (record, listing entries, and the counter of a
        finish); no batch is atomic.
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
        items = [{"Update": update}] + [
            {"Put": {"TableName": self._table, "Item": item}}
            for item in listing_items(event, self._shards, self._retention)
        ]
        count = count_update(event, self._table, self._shards, self._retention)
        if count is not None:
            items.append({"Update": count})
        try:
            self._client.transact_write_items(TransactItems=items)
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
        hours = (
            self._listing.ids_of(f"jobs#{now - dt.timedelta(hours=back):%Y%m%d%H}")
            for back in range(int(self._retention // 3600) + 2)
        )
        return matching_records(
            self._listing,
            hours,
            lambda record: (
                (statuses is None or record.status in statuses)
                and (queue is None or record.queue == queue)
            ),
            limit,
        )

    def find(self, search: r.JobSearch) -> list[r.JobRecord]:
        """A ``Query`` of the tag's entries, or of each hour's listing in the
        range, newest first, then the records they name (:mod:`._record_search`)."""
        return find_records(self._listing, search, self._retention)

    def finished_per_minute(self, since: dt.datetime) -> list[r.MinuteCount]:
        """Sum the finish counters of each minute from ``since``'s: one ``Query``
        per hour and shard, never a record read (:mod:`._record_listing`).

        Counts transitions into a final status, so a job redriven and finished
        again counts once per finish; jobs finished before the counters existed
        count nothing.
        """
        return self._listing.minute_counts(since, dt.datetime.now(dt.UTC))

    def prune(self, older_than: dt.datetime, limit: int | None = None) -> int:
        """Nothing to do: DynamoDB's TTL deletes expired records."""
        return 0
