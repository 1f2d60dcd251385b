"""Job records and workers in each store: writes that never go backwards, listing."""

from __future__ import annotations

import datetime as dt
import typing as t
import zlib

import pytest
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store import WorkerRecord
from flask_sqs_jobs.store.model._records import JobEvent

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def event(status: str, attempts: int = 1, **fields: t.Any) -> JobEvent:
    return JobEvent("job-1", "send", "default", status, attempts, NOW, **fields)


def test_a_late_running_write_does_not_undo_success(store: JobStore) -> None:
    records = store.job_records()
    records.write([event("running", started_at=NOW)])
    records.write([event("succeeded", finished_at=NOW, result='{"n": 1}')])
    records.write([event("running", started_at=NOW)])
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.result, record.finished_at) == (
        "succeeded",
        {"n": 1},
        NOW,
    )


def test_a_late_queued_write_keeps_the_workers_status(store: JobStore) -> None:
    records = store.job_records()
    records.write([event("running", started_at=NOW)])
    records.write([event("queued", attempts=0, enqueued_at=NOW)])
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.attempts) == ("running", 1)


def test_a_later_attempt_replaces_an_earlier_one_but_never_the_reverse(
    store: JobStore,
) -> None:
    records = store.job_records()
    records.write(
        [
            event("running", 1),
            event("retrying", 1, error="RuntimeError: boom"),
            event("running", 2),
        ]
    )
    records.write([event("retrying", 1, error="late")])
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.attempts, record.error) == ("running", 2, None)


def test_a_deferred_or_redriven_job_runs_again_with_a_fresh_receive_count(
    store: JobStore,
) -> None:
    records = store.job_records()
    records.write([event("deferred", 3)])
    records.write([event("running", 1)])
    assert records.get("job-1").status == "running"  # type: ignore[union-attr]
    records.write([event("dead_lettered", 4)])
    records.write([event("running", 1), event("succeeded", 1)])
    assert records.get("job-1").status == "succeeded"  # type: ignore[union-attr]


def test_progress_updates_a_running_job_only(store: JobStore) -> None:
    records = store.job_records()
    records.write(
        [event("running"), event("progress", progress=0.5, progress_message="half")]
    )
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.progress, record.progress_message) == (
        "running",
        0.5,
        "half",
    )
    records.write([event("succeeded"), event("progress", progress=0.9)])
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.progress) == ("succeeded", 0.5)


def test_recent_lists_newest_first_and_filters(store: JobStore) -> None:
    records = store.job_records()
    for i, status in enumerate(["succeeded", "failed", "succeeded"]):
        records.write(
            [
                JobEvent(
                    f"job-{i}",
                    "send",
                    "critical" if i == 2 else "default",
                    status,
                    1,
                    NOW - dt.timedelta(seconds=10 - i),
                )
            ]
        )
    assert [r.job_id for r in records.recent(10)] == ["job-2", "job-1", "job-0"]
    assert [r.job_id for r in records.recent(10, status="succeeded")] == [
        "job-2",
        "job-0",
    ]
    assert [r.job_id for r in records.recent(10, queue="default")] == [
        "job-1",
        "job-0",
    ]
    assert [r.job_id for r in records.recent(1)] == ["job-2"]
    with pytest.raises(ValueError, match="unknown job status 'done'"):
        records.recent(status="done")


def test_prune_deletes_records_older_than_the_cutoff(store: JobStore) -> None:
    if not isinstance(store, SQLAlchemyStore):
        pytest.skip("DynamoDB's TTL prunes records (see the expiry test)")
    records = store.job_records()
    old = JobEvent("old", "send", "default", "succeeded", 1, NOW - dt.timedelta(days=8))
    new = JobEvent("new", "send", "default", "succeeded", 1, NOW)
    records.write([old, new])
    assert records.prune(NOW - dt.timedelta(days=7)) == 1
    assert records.get("old") is None
    assert records.get("new") is not None


def test_workers_register_refresh_and_remove(store: JobStore) -> None:
    registry = store.worker_registry()
    worker = WorkerRecord("h:1:ab", "h", 1, ("default",), 4, 0, NOW, NOW, "1.0")
    registry.register(worker)
    later = NOW + dt.timedelta(seconds=15)
    assert registry.refresh("h:1:ab", 3, later) is True
    (listed,) = registry.list()
    assert (listed.busy_slots, listed.last_seen_at, listed.queues) == (
        3,
        later,
        ("default",),
    )
    registry.remove("h:1:ab")
    assert registry.list() == []
    assert registry.refresh("h:1:ab", 0, later) is False


def test_dynamodb_items_expire_after_the_retention(
    dynamodb_store: DynamoDBStore,
) -> None:
    records = dynamodb_store.job_records(retention_seconds=3600)
    records.write([event("running"), event("succeeded")])
    items = dynamodb_store.client.scan(TableName=dynamodb_store.table_name)["Items"]
    expiries = {int(item["expires_at_epoch"]["N"]) for item in items}
    assert expiries == {int(NOW.timestamp()) + 3600}
    shard = zlib.crc32(b"job-1") % dynamodb_store.record_shards
    assert {item["pk"]["S"] for item in items} == {
        "job#job-1",
        f"jobs#{NOW:%Y%m%d%H}#{shard}",
        f"counts#{NOW:%Y%m%d%H}#{shard}",
    }


def test_a_whole_life_in_one_batch_keeps_every_field(store: JobStore) -> None:
    records = store.job_records()
    earlier = NOW - dt.timedelta(seconds=5)
    records.write(
        [
            event("queued", 0, enqueued_at=earlier),
            event("running", started_at=NOW),
            event("progress", progress=0.5, progress_message="half"),
            event("succeeded", finished_at=NOW, result="7"),
        ]
    )
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.result, record.progress) == ("succeeded", 7, 0.5)
    assert (record.enqueued_at, record.started_at, record.finished_at) == (
        earlier,
        NOW,
        NOW,
    )
    assert record.progress_message == "half"


def test_many_jobs_in_one_batch_each_get_their_record(store: JobStore) -> None:
    records = store.job_records()
    ids = ("parked-1", "parked-2", "a", "b")
    records.write([JobEvent(i, "t", "default", "deferred", 2, NOW) for i in ids[:2]])
    records.write(
        [
            JobEvent(job_id, "t", "default", status, 1, NOW)
            for job_id in ids
            for status in ("running", "succeeded")
        ]
    )
    statuses = [getattr(records.get(i), "status", None) for i in ids]
    assert statuses == ["succeeded"] * 4


def test_a_duplicate_of_a_job_whose_record_is_unfinished_is_recorded(
    store: JobStore,
) -> None:
    records = store.job_records()
    records.write([event("queued", 0, enqueued_at=NOW)])
    records.write([event("duplicate", 1, finished_at=NOW)])
    record = records.get("job-1")
    assert record is not None
    assert (record.status, record.attempts, record.finished_at) == (
        "duplicate",
        1,
        NOW,
    )


def forged(status: str, attempts: int = 1, **fields: t.Any) -> JobEvent:
    """A write for ``job-1`` under another job type (a message reusing its id)."""
    return JobEvent("job-1", "refund", "default", status, attempts, NOW, **fields)


@pytest.mark.parametrize("then", ["running", "queued", "progress", "unfinished"])
def test_a_write_of_another_job_type_is_refused_and_reported(
    store: JobStore, then: str
) -> None:
    records = store.job_records()
    assert records.write([event("running", started_at=NOW)]) == []
    if then != "unfinished":
        records.write([event("succeeded", finished_at=NOW, result='{"id": 7}')])
    later = NOW + dt.timedelta(seconds=1)
    status = "running" if then == "unfinished" else then
    refused = records.write(
        [
            JobEvent("job-1", "refund", "default", status, 5, later, progress=0.5),
            JobEvent("job-1", "refund", "default", "succeeded", 5, later, result="1"),
        ]
    )
    assert {(w.job_id, w.recorded_job_type, w.job_type) for w in refused} == {
        ("job-1", "send", "refund")
    }
    record = records.get("job-1")
    assert record is not None
    assert record.job_type == "send"
    assert record.attempts == 1
    assert record.status == ("running" if then == "unfinished" else "succeeded")
    assert record.result == (None if then == "unfinished" else {"id": 7})


def test_the_first_write_fixes_the_job_type_within_one_batch(store: JobStore) -> None:
    records = store.job_records()
    refused = records.write(
        [
            forged("running", started_at=NOW),
            event("running", started_at=NOW),
            event("succeeded", finished_at=NOW, result="2"),
            forged("succeeded", finished_at=NOW, result="3"),
        ]
    )
    assert [(w.recorded_job_type, w.job_type) for w in refused] == [("refund", "send")]
    record = records.get("job-1")
    assert record is not None
    assert (record.job_type, record.status, record.result) == ("refund", "succeeded", 3)


FINAL = ("succeeded", "failed", "dead_lettered", "duplicate")
#: Late writes of every kind, of attempts below, equal to and above the first's.
LATE = (
    ("dead_lettered", 1),
    ("failed", 9),
    ("succeeded", 2),
    ("duplicate", 3),
    ("retrying", 4),
    ("queued", 0),
)


def test_a_finished_record_keeps_its_status_result_and_error(store: JobStore) -> None:
    records = store.job_records()
    first: list[JobEvent] = []
    late: list[JobEvent] = []
    for final in FINAL:
        error = None if final in ("succeeded", "duplicate") else "RuntimeError: 1st"
        for status, attempts in LATE:
            job_id = f"{final}-{status}"
            first += [
                JobEvent(job_id, "t", "q", "running", 1, NOW, started_at=NOW),
                JobEvent(job_id, "t", "q", final, 1, NOW, result="1", error=error),
            ]
            late.append(
                JobEvent(
                    job_id,
                    "t",
                    "q",
                    status,
                    attempts,
                    NOW + dt.timedelta(seconds=1),
                    finished_at=NOW + dt.timedelta(seconds=1),
                    error="IdempotencyConflictError: another payload",
                )
            )
    records.write(first)
    assert records.write(late) == []
    for final in FINAL:
        error = None if final in ("succeeded", "duplicate") else "RuntimeError: 1st"
        for status, _ in LATE:
            record = records.get(f"{final}-{status}")
            assert record is not None
            assert (record.status, record.attempts, record.result, record.error) == (
                final,
                1,
                1,
                error,
            ), f"{status} over {final}"


def test_a_finished_record_is_not_restarted_but_a_dead_letter_or_a_failure_is(
    store: JobStore,
) -> None:
    records = store.job_records()
    ids = ("done", "failed", "dead")
    records.write(
        [
            JobEvent(job_id, "t", "default", status, 3, NOW)
            for job_id, status in zip(
                ids, ["succeeded", "failed", "dead_lettered"], strict=True
            )
        ]
    )
    records.write(
        [JobEvent(job_id, "t", "default", "running", 1, NOW) for job_id in ids]
    )
    statuses = [getattr(records.get(i), "status", None) for i in ids]
    # A failed job runs again only when sent again (a retry from its record).
    assert statuses == ["succeeded", "running", "running"]
