"""DynamoDB job records: the write units of each partition key, the chart's reads.

``python -m bench.dynamodb_keys [--jobs 10000] [--shards 16]`` writes the
records of ``--jobs`` jobs (their ``queued``, ``running`` and ``succeeded``
events, in batches of the record writer's size, as a web process and a worker
write them) through ``DynamoDBJobRecords.write`` against moto in-process
(``moto.mock_aws``), with ``--shards`` listing keys an hour and with one.
A botocore hook counts the requests and, per partition key, the write units
(two per item of a ``TransactWriteItems``, as AWS bills transactions of items
under 1 KB). Then it counts what the dashboard's chart read,
``finished_per_minute(an hour ago)``, costs with 1,000 and with ``--jobs``
jobs of the last hour: ``Query`` requests and the items they return. It
prints two Markdown tables; no server, no AWS account.

moto copies every table a ``TransactWriteItems`` touches, to roll it back,
which makes 30,000 transactions quadratic; the bench skips that copy, so it
checks that no transaction failed (none is refused: each job's events are
written in order).
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import datetime as dt
import typing as t
import unittest.mock

import boto3
import moto
import moto.dynamodb.models as moto_dynamodb
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records._writer import BATCH_SIZE
from moto.dynamodb.models.table import Table

#: What a partition key takes in write units a second.
KEY_LIMIT = 1000
#: The fleet rate the hottest key is judged at.
FLEET_RATE = 10_000


@dataclasses.dataclass
class Calls:
    """What the store's client sent: requests, write units per key, items read."""

    requests: int = 0
    units: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    queries: int = 0
    items_read: int = 0
    failures: int = 0

    def hook(self, client: t.Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb.*", self._before)
        client.meta.events.register("after-call.dynamodb.Query", self._after_query)
        client.meta.events.register("after-call.dynamodb.*", self._after)

    def _before(self, event_name: str, params: dict[str, t.Any], **_: t.Any) -> None:
        self.requests += 1
        operation = event_name.rsplit(".", 1)[-1]
        if operation == "Query":
            self.queries += 1
        for item in params.get("TransactItems", []):
            kind, body = next(iter(item.items()))
            key = body["Item"] if kind == "Put" else body["Key"]
            self.units[key["pk"]["S"]] += 2
        if operation == "UpdateItem":
            self.units[params["Key"]["pk"]["S"]] += 1

    def _after(self, http_response: t.Any, **_: t.Any) -> None:
        self.failures += http_response.status_code >= 300

    def _after_query(self, parsed: dict[str, t.Any], **_: t.Any) -> None:
        self.items_read += len(parsed.get("Items", []))


def _events(jobs: int, now: dt.datetime) -> list[list[JobEvent]]:
    """Each job's three events, a phase at a time, over the last 59 minutes."""
    queued, running, succeeded = [], [], []
    for i in range(jobs):
        at = now - dt.timedelta(seconds=(i * 3540) // jobs)
        job_id = f"job-{i:06d}"
        queued.append(JobEvent(job_id, "send", "default", "queued", 0, at))
        running.append(
            JobEvent(job_id, "send", "default", "running", 1, at, started_at=at)
        )
        status = "failed" if i % 10 == 0 else "succeeded"
        succeeded.append(
            JobEvent(job_id, "send", "default", status, 1, at, finished_at=at)
        )
    return [queued, running, succeeded]


def _store(shards: int, jobs: int) -> tuple[DynamoDBStore, Calls]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    table = f"jobs-{shards}-{jobs}"
    store = DynamoDBStore(table, boto_client=client, record_shards=shards)
    store.create_tables()
    calls = Calls()
    calls.hook(client)
    return store, calls


_filled: dict[tuple[int, int], tuple[DynamoDBStore, Calls]] = {}


def _write(jobs: int, shards: int, now: dt.datetime) -> tuple[DynamoDBStore, Calls]:
    """A table holding the records of ``jobs`` jobs (filled once per size)."""
    if (jobs, shards) not in _filled:
        store, calls = _store(shards, jobs)
        records = store.job_records()
        for phase in _events(jobs, now):
            for start in range(0, len(phase), BATCH_SIZE):
                records.write(phase[start : start + BATCH_SIZE])
        if calls.failures:
            raise SystemExit(f"{calls.failures} requests failed")
        _filled[jobs, shards] = store, calls
    return _filled[jobs, shards]


def writes(jobs: int, shards: int, now: dt.datetime) -> str:
    """A row of the write table: requests and units per job, the hottest key."""
    _, calls = _write(jobs, shards, now)
    by_family_hour: collections.Counter[str] = collections.Counter()
    for key, units in calls.units.items():
        if not key.startswith("job#"):
            by_family_hour[key.rsplit("#", 1)[0]] += units
    hottest, units = max(
        ((k, u) for k, u in calls.units.items() if not k.startswith("job#")),
        key=lambda pair: pair[1],
    )
    share = units / by_family_hour[hottest.rsplit("#", 1)[0]]
    target = 1.1 / shards
    family = hottest.split("#", 1)[0]
    family_units = sum(u for k, u in calls.units.items() if k.startswith(family + "#"))
    rate = share * family_units / jobs * FLEET_RATE
    per_job = sum(calls.units.values()) / jobs
    return (
        f"| {shards} | {calls.requests / jobs:.2f} | {per_job:.1f}"
        f" | `{hottest}` | {share:.1%} | {target:.1%} | {rate:,.0f}"
        f" ({'over' if rate > KEY_LIMIT else 'under'} {KEY_LIMIT:,}) |"
    )


def chart(jobs: int, shards: int, now: dt.datetime) -> str:
    """A row of the chart table: what ``finished_per_minute`` reads."""
    store, calls = _write(jobs, shards, now)
    calls.queries = calls.items_read = calls.requests = 0
    counts = store.job_records().finished_per_minute(now - dt.timedelta(hours=1))
    counted = sum(c.count for c in counts)
    return (
        f"| {jobs:,} | {shards} | {calls.requests} | {calls.queries}"
        f" | {calls.items_read} | {counted:,} |"
    )


class _NoTableCopy:
    """``copy`` for moto's DynamoDB models: tables are not copied, items are."""

    @staticmethod
    def deepcopy(value: t.Any) -> t.Any:
        return value if isinstance(value, Table) else copy.deepcopy(value)


def _patched(owner: object, name: str, value: object) -> t.Any:
    return unittest.mock.patch.object(owner, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs written")
    parser.add_argument("--shards", type=int, default=16, help="record_shards")
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    no_table_copy = _NoTableCopy()
    with moto.mock_aws(), _patched(moto_dynamodb, "copy", no_table_copy):
        print(
            f"Writes of {args.jobs:,} jobs (queued, running, then succeeded or failed;"
            f" batches of {BATCH_SIZE}):\n"
        )
        print(
            "| shards | requests per job | write units per job | hottest key"
            " | its share of its hour's writes | target (1/shards + 10 %)"
            f" | its WCU/s at {FLEET_RATE:,} jobs/s |"
        )
        print("| ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for shards in sorted({1, args.shards}):
            print(writes(args.jobs, shards, now))
        print("\nThe chart's read, `finished_per_minute(an hour ago)`:\n")
        print(
            "| jobs in the hour | shards | requests | queries | items read | counted |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for jobs in sorted({1000, args.jobs}):
            print(chart(jobs, args.shards, now))


if __name__ == "__main__":
    main()
