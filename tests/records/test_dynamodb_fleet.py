"""DynamoDB job records at fleet scale: sharded listing keys, finish counters."""

from __future__ import annotations

import collections
import datetime as dt
import math
import typing as t
import zlib

import pytest
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.model._records import JobSearch
from flask_sqs_jobs.store.model._records import MinuteCount

SHARDS = 4
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture
def sharded(dynamodb_store: DynamoDBStore) -> DynamoDBStore:
    """The test table, its records sharded over :data:`SHARDS` keys."""
    return DynamoDBStore(
        dynamodb_store.table_name,
        boto_client=dynamodb_store.client,
        record_shards=SHARDS,
    )


def _event(
    job_id: str, status: str, at: dt.datetime, attempts: int = 1, **fields: t.Any
) -> JobEvent:
    finished = {"finished_at": at} if status not in ("queued", "running") else {}
    return JobEvent(
        job_id, "send", "default", status, attempts, at, **{**finished, **fields}
    )


def _items(store: DynamoDBStore) -> list[dict[str, t.Any]]:
    items: list[dict[str, t.Any]] = []
    for page in store.client.get_paginator("scan").paginate(TableName=store.table_name):
        items += page["Items"]
    return items


def _counts(store: DynamoDBStore) -> dict[str, int]:
    return {
        item["sk"]["S"]: int(item["count"]["N"])
        for item in _items(store)
        if item["pk"]["S"].startswith("counts#")
    }


def _calls(store: DynamoDBStore) -> collections.Counter[str]:
    """The store client's requests from now on, by operation."""
    calls: collections.Counter[str] = collections.Counter()

    def count(event_name: str, **_: t.Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    store.client.meta.events.register("before-call.dynamodb.*", count)
    return calls


def test_listing_entries_land_in_the_shard_of_their_job_id(
    sharded: DynamoDBStore,
) -> None:
    jobs = 400
    events = [_event(f"job-{i}", "queued", NOW, 0, tags=("all",)) for i in range(jobs)]
    sharded.job_records().write(events)

    per_key: collections.Counter[str] = collections.Counter()
    for item in _items(sharded):
        kind, _, rest = item["pk"]["S"].partition("#")
        if kind in ("jobs", "tag"):
            shard = zlib.crc32(item["job_id"]["S"].encode()) % SHARDS
            assert item["pk"]["S"] == f"{kind}#{rest.rsplit('#', 1)[0]}#{shard}"
            per_key[item["pk"]["S"]] += 1
    hour = f"{NOW:%Y%m%d%H}"
    assert set(per_key) == {
        f"{kind}#{part}#{shard}"
        for kind, part in (("jobs", hour), ("tag", "all"))
        for shard in range(SHARDS)
    }
    # A shard's entries are Binomial(400, 1/4): mean 100, deviation 8.7; the
    # ids are fixed, so this holds or fails every run. 5 deviations above the
    # mean would be a hash far from uniform.
    bound = jobs / SHARDS + 5 * math.sqrt(jobs * (1 / SHARDS) * (1 - 1 / SHARDS))
    assert max(per_key.values()) <= bound


def test_a_refused_write_counts_nothing(sharded: DynamoDBStore) -> None:
    records = sharded.job_records()
    records.write([_event("a", "running", NOW, attempts=2)])
    records.write([_event("a", "failed", NOW, attempts=1)])  # an older attempt
    records.write([_event("a", "succeeded", NOW, attempts=2)])
    records.write([_event("a", "succeeded", NOW, attempts=2)])  # over a final one
    records.write([_event("a", "expired", NOW, attempts=3)])  # over a final one

    minute = f"{NOW:%Y%m%d%H%M}"
    assert _counts(sharded) == {f"{minute}#succeeded#default": 1}
    record = records.get("a")
    assert record is not None
    assert record.status == "succeeded"


def test_a_redriven_job_counts_each_finish(sharded: DynamoDBStore) -> None:
    records = sharded.job_records()
    at = NOW.replace(second=10)
    later = at + dt.timedelta(seconds=1)
    records.write([_event("b", "running", at), _event("b", "dead_lettered", at)])
    records.write([_event("b", "running", later)])  # the redrive's delivery
    records.write([_event("b", "dead_lettered", later)])

    counts = records.finished_per_minute(at - dt.timedelta(minutes=1))

    assert counts == [MinuteCount(at.replace(second=0), "default", "dead_lettered", 2)]


def test_a_queue_name_with_hashes_is_counted_as_it_is(
    sharded: DynamoDBStore,
) -> None:
    records = sharded.job_records()
    queue = "a#b#failed"
    records.write([JobEvent("c", "send", queue, "succeeded", 1, NOW, finished_at=NOW)])

    counts = records.finished_per_minute(NOW - dt.timedelta(minutes=1))

    assert counts == [MinuteCount(NOW.replace(second=0), queue, "succeeded", 1)]


@pytest.mark.parametrize("jobs", [3, 60])
def test_the_chart_reads_no_record_and_as_many_queries_whatever_the_jobs(
    sharded: DynamoDBStore, jobs: int
) -> None:
    records = sharded.job_records()
    since = NOW.replace(second=0) - dt.timedelta(minutes=59)
    records.write(
        [
            _event(f"job-{i}", "succeeded", NOW - dt.timedelta(minutes=i % 50))
            for i in range(jobs)
        ]
    )
    calls = _calls(sharded)

    before = _hours_since(since)
    counts = records.finished_per_minute(since)
    after = _hours_since(since)

    assert sum(c.count for c in counts) == jobs
    assert set(calls) == {"Query"}
    assert calls["Query"] in {before * SHARDS, after * SHARDS}


def _hours_since(since: dt.datetime) -> int:
    """The hours from ``since``'s to now's, both counted."""
    return 1 + (dt.datetime.now(dt.UTC).hour - since.hour) % 24


def test_recent_and_find_merge_shards_and_legacy_entries_newest_first(
    sharded: DynamoDBStore,
) -> None:
    records = sharded.job_records()
    records.write(
        [
            _event(f"job-{i}", "queued", NOW - dt.timedelta(seconds=i), 0, tags=("t",))
            for i in range(1, 30)
        ]
    )
    # An entry written before shards existed: the hour's and the tag's unsharded keys.
    legacy = _event("legacy", "queued", NOW, 0, tags=("t",))
    records.write([legacy])
    for item in _items(sharded):
        if item["sk"]["S"].endswith("#legacy"):
            sharded.client.delete_item(
                TableName=sharded.table_name, Key={"pk": item["pk"], "sk": item["sk"]}
            )
            kind = item["pk"]["S"].rsplit("#", 1)[0]
            sharded.client.put_item(
                TableName=sharded.table_name, Item={**item, "pk": {"S": kind}}
            )
    newest = ["legacy"] + [f"job-{i}" for i in range(1, 30)]

    assert [r.job_id for r in records.recent(12)] == newest[:12]
    assert [r.job_id for r in records.recent(100)] == newest
    assert [r.job_id for r in records.find(JobSearch(tag="t", limit=7))] == newest[:7]
    window = JobSearch(
        since=NOW - dt.timedelta(seconds=10), until=NOW - dt.timedelta(seconds=2)
    )
    assert [r.job_id for r in records.find(window)] == newest[3:11]


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        (0, "record_shards must be from 1 to 256 .*got 0"),
        (257, "record_shards must be from 1 to 256 .*got 257"),
        ("16", "record_shards must be an int from 1 to 256 .*got '16'"),
        (True, "record_shards must be an int .*got True"),
    ],
)
def test_the_shard_count_is_checked(shards: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DynamoDBStore("jobs", record_shards=shards)  # type: ignore[arg-type]
