"""Searching job records in each store: by tag, job type, status and time range."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store.model import job_search
from flask_sqs_jobs.store.model._records import JobEvent

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def write(
    store: JobStore,
    job_id: str,
    job_type: str,
    status: str,
    minutes_ago: int,
    tags: tuple[str, ...] = (),
) -> None:
    at = NOW - dt.timedelta(minutes=minutes_ago)
    store.job_records().write(
        [
            JobEvent(
                job_id, job_type, "default", "queued", 0, at, enqueued_at=at, tags=tags
            ),
            JobEvent(job_id, job_type, "default", status, 1, at, tags=tags),
        ]
    )


def ids(store: JobStore, **filters: t.Any) -> list[str]:
    return [record.job_id for record in store.job_records().find(job_search(**filters))]


@pytest.fixture
def tagged(store: JobStore) -> JobStore:
    write(store, "a", "charge", "succeeded", 30, ("customer:1", "vip"))
    write(store, "b", "charge", "failed", 20, ("customer:2",))
    write(store, "c", "refund", "failed", 10, ("customer:1",))
    write(store, "d", "refund", "succeeded", 5)
    return store


def test_a_tag_finds_its_jobs_newest_first_with_their_tags(tagged: JobStore) -> None:
    assert ids(tagged, tag="customer:1") == ["c", "a"]
    assert ids(tagged, tag="nobody") == []
    record = tagged.job_records().get("a")
    assert record is not None
    assert sorted(record.tags) == ["customer:1", "vip"]
    found = tagged.job_records().find(job_search(tag="vip"))
    assert [sorted(each.tags) for each in found] == [["customer:1", "vip"]]


def test_filters_combine(tagged: JobStore) -> None:
    assert ids(tagged, job_type="refund") == ["d", "c"]
    assert ids(tagged, status="failed") == ["c", "b"]
    assert ids(tagged, tag="customer:1", status="failed") == ["c"]
    assert ids(tagged, job_type="charge", status=("failed", "succeeded")) == ["b", "a"]
    assert ids(tagged, limit=2) == ["d", "c"]


def test_a_time_range_bounds_the_last_update(tagged: JobStore) -> None:
    since = NOW - dt.timedelta(minutes=25)
    until = NOW - dt.timedelta(minutes=7)
    assert ids(tagged, since=since, until=until) == ["c", "b"]
    assert ids(tagged, tag="customer:1", since=since) == ["c"]


def test_a_later_write_moves_a_tagged_job_to_the_front(tagged: JobStore) -> None:
    write(tagged, "e", "charge", "retrying", 40, ("customer:1",))
    assert ids(tagged, tag="customer:1") == ["c", "a", "e"]
    later = NOW + dt.timedelta(minutes=1)
    tagged.job_records().write(
        [JobEvent("e", "charge", "default", "running", 2, later, tags=("customer:1",))]
    )
    assert ids(tagged, tag="customer:1") == ["e", "c", "a"]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"status": "lost"}, "unknown job status"),
        ({"tag": ""}, "tag must be 1 to 64"),
        ({"tag": "x" * 65}, "tag must be 1 to 64"),
        ({"since": dt.datetime(2026, 1, 1)}, "since must be an aware datetime"),
        ({"limit": 0}, "limit must be 1 to 500"),
    ],
)
def test_a_wrong_filter_is_refused_with_its_name(
    filters: dict[str, t.Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        job_search(**filters)
