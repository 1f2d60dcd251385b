"""Each outcome lands as its status, "duplicate" (idempotent handlers) included."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import Outcome
from flask_sqs_jobs.engine.model._job_runtime import JobRuntime
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.records._recording import RecordingHooks
from flask_sqs_jobs.store.records._writer import RecordWriter


class Collected:
    """Records that keep what was written."""

    def __init__(self) -> None:
        self.events: list[JobEvent] = []

    def write(self, events: cabc.Sequence[JobEvent]) -> None:
        self.events.extend(events)


@pytest.mark.parametrize(
    ("outcome", "status", "finished"),
    [
        ("success", "succeeded", True),
        ("retry", "retrying", False),
        ("delete", "failed", True),
        ("dead_lettered", "dead_lettered", True),
        ("deferred", "deferred", False),
        ("duplicate", "duplicate", True),
        ("heartbeat_failed", "retrying", False),
        ("delete_failed", "retrying", False),
    ],
)
def test_outcome_to_status(outcome: str, status: str, finished: bool) -> None:
    collected = Collected()
    hooks = RecordingHooks(
        RecordWriter(lambda: t.cast(t.Any, collected), synchronous=True)
    )
    job = Job("t", {}, "default", job_id="j-1", receive_count=2)
    value = Outcome(outcome) if outcome in Outcome.__members__.values() else outcome
    hooks.job_finished(job, t.cast(Outcome, value), 12.0, None)
    [written] = collected.events
    assert (written.status, written.attempts) == (status, 2)
    assert (written.finished_at is not None) == finished
    assert written.error == (
        None if status in ("succeeded", "duplicate", "deferred") else outcome
    )


def recorded(
    job: Job, outcome: Outcome, exception: BaseException | None
) -> list[JobEvent]:
    collected = Collected()
    hooks = RecordingHooks(
        RecordWriter(lambda: t.cast(t.Any, collected), synchronous=True)
    )
    hooks.job_finished(job, outcome, 1.0, exception)
    return collected.events


def test_an_error_whose_text_cannot_be_read_still_finishes_the_record() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    job = Job("t", {}, "default", job_id="j-1", receive_count=1)
    [written] = recorded(job, Outcome.DELETE, Unprintable())
    assert (written.status, written.error) == ("failed", "Unprintable")
    assert written.finished_at is not None


def held_by(holder: str | None) -> Job:
    job = Job("t", {}, "default", job_id="j-1", receive_count=3)
    runtime = JobRuntime(t.cast(t.Any, None), None)
    runtime.key_holder = holder
    job._runtime = runtime
    return job


@pytest.mark.parametrize(
    ("holder", "writes"), [("j-1", 0), ("another-job", 1), (None, 1)]
)
def test_a_delivery_that_found_its_own_job_ids_key_held_writes_nothing(
    holder: str | None, writes: int
) -> None:
    job = held_by(holder)
    for outcome in (Outcome.RETRY, Outcome.DEAD_LETTERED):
        assert len(recorded(job, outcome, None)) == writes


def test_a_delivery_that_found_its_own_job_ids_key_completed_finishes_the_record(
    store: JobStore,
) -> None:
    """The run that completed the key died before its record said so (SIGKILL),
    or its delete failed (``retrying``): the job is done, so the record is too."""
    records = store.job_records()
    hooks = RecordingHooks(RecordWriter(lambda: records, synchronous=True))
    first = Job("t", {}, "default", job_id="j-1", receive_count=1)
    hooks.job_started(first)
    hooks.job_finished(first, Outcome.DELETE_FAILED, 5.0, None, result={"n": 1})
    assert (before := records.get("j-1")) is not None
    assert before.status == "retrying"
    hooks.job_finished(held_by("j-1"), Outcome.DUPLICATE, 1.0, None, result={"n": 1})
    record = records.get("j-1")
    assert record is not None
    assert (record.status, record.result, record.error) == ("succeeded", {"n": 1}, None)
    assert record.finished_at is not None
    # A finished record stays as it is.
    hooks.job_finished(held_by("j-1"), Outcome.DUPLICATE, 1.0, None, result={"n": 2})
    assert (after := records.get("j-1")) is not None
    assert after.result == {"n": 1}


@pytest.mark.parametrize("outcome", [Outcome.DELETE_FAILED, Outcome.HEARTBEAT_FAILED])
def test_a_run_that_completed_its_key_succeeded_whatever_its_delete(
    outcome: Outcome,
) -> None:
    """The delete may have been applied with its answer lost: no delivery follows
    to finish the record, and any that does is a duplicate."""
    job = held_by(None)
    assert job._runtime is not None
    job._runtime.key_completed = True
    collected = Collected()
    hooks = RecordingHooks(
        RecordWriter(lambda: t.cast(t.Any, collected), synchronous=True)
    )
    hooks.job_finished(job, outcome, 5.0, None, result={"n": 1})
    [written] = collected.events
    assert (written.status, written.result, written.error) == (
        "succeeded",
        '{"n":1}',
        None,
    )
    assert written.finished_at is not None
    # Without a completed key the job runs again: it is retrying.
    job._runtime.key_completed = False
    hooks.job_finished(job, outcome, 5.0, None, result={"n": 1})
    assert collected.events[-1].status == "retrying"
