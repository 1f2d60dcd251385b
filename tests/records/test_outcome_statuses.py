"""Each outcome lands as its status, "duplicate" (idempotent handlers) included."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import Outcome
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
