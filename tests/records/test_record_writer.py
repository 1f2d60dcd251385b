"""The writer thread: a stuck or slow store never holds a job up."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import threading
import typing as t

import pytest
from flask_sqs_jobs.engine.ops._store_errors import store_error_counts
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.store.model._records import RefusedWrite
from flask_sqs_jobs.store.records import _writer
from flask_sqs_jobs.store.records._writer import RecordWriter

if t.TYPE_CHECKING:
    from structlog.typing import EventDict


class StuckRecords:
    """Records whose first write blocks until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.written: list[str] = []

    def write(self, events: cabc.Sequence[JobEvent]) -> None:
        self.entered.set()
        assert self.release.wait(30), "never released"
        self.written.extend(e.job_id for e in events)


NOW = dt.datetime.now(dt.UTC)


def event(n: int) -> JobEvent:
    return JobEvent(f"j-{n}", "t", "default", "queued", 0, dt.datetime.now(dt.UTC))


def test_a_full_queue_drops_new_writes_and_counts_them(
    log_events: list[EventDict],
) -> None:
    records = StuckRecords()
    writer = RecordWriter(lambda: t.cast(t.Any, records), max_pending=3)
    before = store_error_counts().get("job_records", 0)
    writer.submit(event(0))
    assert records.entered.wait(10)
    # The writer holds event 0; three more fill the queue; the rest are dropped.
    for n in range(1, 9):
        writer.submit(event(n))
    assert store_error_counts().get("job_records", 0) - before == 5
    assert not writer.flush(timeout=0.01)
    records.release.set()
    assert writer.flush(timeout=10)
    assert records.written == ["j-0", "j-1", "j-2", "j-3"]
    [dropped] = [e for e in log_events if e["event"] == "job_record_failed"]
    assert (dropped["error_type"], dropped["writes"]) == ("QueueFull", 1)


class RefusingRecords:
    """Records that refuse every write as another job type's."""

    def write(self, events: cabc.Sequence[JobEvent]) -> list[RefusedWrite]:
        return [RefusedWrite(e.job_id, "charge", e.job_type) for e in events]


def test_a_write_refused_for_its_job_type_is_logged_once_and_counted(
    log_events: list[EventDict],
) -> None:
    writer = RecordWriter(lambda: t.cast(t.Any, RefusingRecords()), synchronous=True)
    before = store_error_counts().get("job_record_conflicts", 0)
    forged = JobEvent("order-7", "re\x1b[2Jfund", "q", "running", 1, NOW)
    for status in ("running", "succeeded", "running"):
        writer.submit(dataclasses.replace(forged, status=status))
    writer.submit(dataclasses.replace(forged, job_type="other"))

    lines = [e for e in log_events if e["event"] == "job_record_refused"]
    assert [(e["recorded_job_type"], e["refused_job_type"]) for e in lines] == [
        ("charge", "re\\x1b[2Jfund"),
        ("charge", "other"),
    ]
    assert store_error_counts().get("job_record_conflicts", 0) - before == 2


def test_a_failed_write_is_handed_to_on_error_with_its_queue() -> None:
    class Broken:
        def write(self, events: list[JobEvent]) -> None:
            raise ConnectionError("database down")

    errors: list[tuple[str | None, str]] = []
    writer = RecordWriter(
        lambda: t.cast(t.Any, Broken()),
        synchronous=True,
        on_error=lambda queue, error: errors.append((queue, str(error))),
    )
    writer.submit(
        JobEvent("j1", "work", "critical", "queued", 0, dt.datetime.now(dt.UTC))
    )
    assert errors == [("critical", "database down")]


def test_a_failed_write_is_written_again_while_the_database_restarts(
    monkeypatch: pytest.MonkeyPatch, log_events: list[EventDict]
) -> None:
    monkeypatch.setattr(_writer, "RETRY_DELAYS", (0.0, 0.0, 0.0))

    class Restarting:
        def __init__(self) -> None:
            self.failures = 2
            self.written: list[str] = []

        def write(self, events: list[JobEvent]) -> None:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the database system is shutting down")
            self.written.extend(e.job_id for e in events)

    records = Restarting()
    writer = RecordWriter(lambda: t.cast(t.Any, records))
    writer.submit(event(1))
    assert writer.flush(timeout=30)
    assert records.written == ["j-1"]
    assert not [e for e in log_events if e["event"] == "job_record_failed"]
