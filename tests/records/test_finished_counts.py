"""What the dashboard reads in each store: several statuses, per-minute counts."""

from __future__ import annotations

import datetime as dt

import pytest
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.model._records import MinuteCount
from flask_sqs_jobs.store.records._recording import FINAL


def _finish(
    store: JobStore, job_id: str, status: str, at: dt.datetime, queue: str = "default"
) -> None:
    store.job_records().write(
        [
            JobEvent(job_id, "send", queue, "running", 1, at, started_at=at),
            JobEvent(
                job_id,
                "send",
                queue,
                status,
                1,
                at,
                finished_at=at if status in FINAL else None,
            ),
        ]
    )


def test_recent_takes_several_statuses(store: JobStore) -> None:
    now = dt.datetime.now(dt.UTC)
    for i, status in enumerate(["failed", "succeeded", "dead_lettered", "retrying"]):
        _finish(store, f"job-{i}", status, now + dt.timedelta(seconds=i))
    records = store.job_records()

    failed = records.recent(10, status=("failed", "dead_lettered"))
    one = records.recent(1, status=frozenset({"failed", "dead_lettered"}))

    assert [r.job_id for r in failed] == ["job-2", "job-0"]
    assert [r.job_id for r in one] == ["job-2"]
    with pytest.raises(ValueError, match="unknown job status 'dead'"):
        records.recent(status=("failed", "dead"))
    with pytest.raises(ValueError, match="no job status given"):
        records.recent(status=())


def test_finished_per_minute_counts_each_minute_queue_and_status(
    store: JobStore,
) -> None:
    now = dt.datetime.now(dt.UTC)
    minute = now.replace(second=0, microsecond=0)
    earlier = minute - dt.timedelta(minutes=5)
    since = minute - dt.timedelta(minutes=59)
    _finish(store, "a", "succeeded", earlier + dt.timedelta(seconds=1))
    _finish(store, "b", "succeeded", earlier + dt.timedelta(seconds=59))
    _finish(store, "c", "dead_lettered", earlier + dt.timedelta(seconds=30))
    _finish(store, "d", "succeeded", minute, queue="critical")
    _finish(store, "too-old", "succeeded", since - dt.timedelta(seconds=1))
    _finish(store, "retrying", "retrying", minute)  # not finished
    store.job_records().write(
        [JobEvent("queued", "send", "default", "queued", 0, now, enqueued_at=now)]
    )

    counts = store.job_records().finished_per_minute(since)

    assert sorted(counts, key=lambda c: (c.minute, c.queue, c.status)) == [
        MinuteCount(earlier, "default", "dead_lettered", 1),
        MinuteCount(earlier, "default", "succeeded", 2),
        MinuteCount(minute, "critical", "succeeded", 1),
    ]
    assert all(c.minute.tzinfo is not None for c in counts)


def _total(store: JobStore, since: dt.datetime) -> dict[str, int]:
    totals: dict[str, int] = {}
    for count in store.job_records().finished_per_minute(since):
        totals[count.status] = totals.get(count.status, 0) + count.count
    return totals


def test_a_refused_write_counts_nothing(store: JobStore) -> None:
    now = dt.datetime.now(dt.UTC)
    since = now - dt.timedelta(minutes=5)
    _finish(store, "a", "succeeded", now)
    records = store.job_records()
    # A duplicate report of the finish, a late failure of an older attempt and
    # another job type's write of the same id: none of them changes the record.
    records.write(
        [JobEvent("a", "send", "default", "succeeded", 1, now, finished_at=now)]
    )
    records.write([JobEvent("a", "send", "default", "failed", 0, now, finished_at=now)])
    records.write(
        [JobEvent("a", "other", "default", "failed", 1, now, finished_at=now)]
    )

    assert _total(store, since) == {"succeeded": 1}


def test_a_job_that_finishes_again_after_a_redrive_counts_each_finish(
    store: JobStore,
) -> None:
    now = dt.datetime.now(dt.UTC)
    since = now - dt.timedelta(minutes=5)
    _finish(store, "a", "dead_lettered", now)
    # Redriven: a new delivery starts it again, and this time it succeeds.
    _finish(store, "a", "succeeded", now + dt.timedelta(seconds=1))

    assert _total(store, since) == {"dead_lettered": 1, "succeeded": 1}
    record = store.job_records().get("a")
    assert record is not None
    assert record.status == "succeeded"


def test_many_finishes_in_one_batch_are_all_counted(store: JobStore) -> None:
    now = dt.datetime.now(dt.UTC)
    events = [
        JobEvent(f"job-{i}", "send", "default", status, 1, now, finished_at=now)
        for i, status in enumerate(["succeeded", "failed"] * 60)
    ]
    store.job_records().write(events)

    assert _total(store, now - dt.timedelta(minutes=1)) == {
        "succeeded": 60,
        "failed": 60,
    }
