"""A job whose key another delivery holds waits without burning its receives."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import JobHandler
from flask_sqs_jobs.engine import JobWorker
from flask_sqs_jobs.engine import Outcome
from flask_sqs_jobs.engine.model._idempotency_keys import payload_fingerprint
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.sql import _idempotency as _sql_idempotency

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.idempotency.conftest import Finished
from tests.idempotency.conftest import make_store_app
from tests.idempotency.test_sql_keys import Clock
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


class LeaseEndsAfter(Hooks):
    """Note each outcome and receive count; end the holder's lease after ``waits``."""

    def __init__(self, clock: Clock, waits: int) -> None:
        self.seen: list[tuple[str, int | None]] = []
        self._clock, self._waits = clock, waits

    def job_finished(
        self, job: Job, outcome: Outcome, *args: t.Any, **kwargs: t.Any
    ) -> None:
        self.seen.append((outcome.value, job.receive_count))
        if len(self.seen) == self._waits:
            self._clock.advance(60)


def run_until_success(app: Flask, jobs: SQSJobs, hooks: LeaseEndsAfter) -> None:
    finished = Finished()

    def succeeded() -> bool:
        return "success" in finished.values()

    worker = jobs.create_worker(app, should_stop=succeeded, hooks=[finished, hooks])
    thread = WorkerThread(worker)
    assert finished.wait_for(succeeded)
    assert thread.join(WAIT) == 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(_sql_idempotency, "_now", clock)
    return clock


def hold_key(app: Flask, jobs: SQSJobs, job_id: str) -> None:
    """Another worker holds ``charge``'s key of ``job_id`` for a second."""
    jobs.store(app).idempotency_keys().claim(
        f"charge:{job_id}",
        payload_hash=payload_fingerprint({}, "charge"),
        job_id="holder",
        lease_seconds=1,
    )


def test_on_a_standard_queue_the_waiting_job_is_sent_again_with_a_fresh_count(
    jobs: SQSJobs,
    sqs: SQSClient,
    store_url: str,
    clock: Clock,
    log_events: list[EventDict],
) -> None:
    dead_letters = create_queue(sqs, "wait-dlq")
    url = create_queue(
        sqs,
        "wait-jobs",
        visibility_timeout=30,
        dead_letter_url=dead_letters,
        max_receive_count=2,
    )
    app = make_store_app(jobs, store_url, "wait-jobs")
    runs: list[str | None] = []

    @jobs.handler("charge", idempotent=True)
    def charge(payload: dict[str, t.Any]) -> None:
        runs.append("ran")

    hold_key(app, jobs, "j1")
    with app.app_context():
        jobs.enqueue("default", "charge", {}, job_id="j1")
    # Three waits on a queue whose maxReceiveCount is 2: each is a new message.
    hooks = LeaseEndsAfter(clock, waits=3)
    run_until_success(app, jobs, hooks)

    assert hooks.seen == [("retry", 1)] * 3 + [("success", 1)]
    assert runs == ["ran"]
    assert message_count(sqs, dead_letters) == 0
    assert message_count(sqs, url) == 0
    waits = events(log_events, "job_finished")[:3]
    assert [line["idempotency"] for line in waits] == ["in_progress"] * 3
    assert all(line["retry_in_seconds"] == 1 for line in waits)
    assert len({line["new_message_id"] for line in waits}) == 3
    assert {line["job_id"] for line in events(log_events, "job_finished")} == {"j1"}
    jobs.store(app).close()


def test_on_a_fifo_queue_the_waiting_job_stays_and_comes_back_in_place(
    jobs: SQSJobs, sqs: SQSClient, store_url: str, clock: Clock
) -> None:
    create_queue(sqs, "wait-jobs.fifo", fifo=True, visibility_timeout=30)
    app = make_store_app(jobs, store_url, "wait-jobs.fifo")
    jobs.handler("charge", idempotent=True)(lambda payload: None)
    hold_key(app, jobs, "j1")
    with app.app_context():
        jobs.enqueue("default", "charge", {}, job_id="j1", message_group_id="g")
    hooks = LeaseEndsAfter(clock, waits=2)
    run_until_success(app, jobs, hooks)

    # A FIFO queue takes no per-message delay: its receive count goes up.
    assert hooks.seen == [("retry", 1), ("retry", 2), ("success", 3)]
    jobs.store(app).close()


def test_a_failed_send_leaves_the_waiting_job_in_place_with_its_visibility_set(
    sqs: SQSClient, tmp_path: t.Any, clock: Clock, log_events: list[EventDict]
) -> None:
    url = create_queue(sqs, "wait-alone", visibility_timeout=30)
    spy = SpyClient(sqs)
    spy.failing["send_message"] = "ServiceUnavailable"
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    keys = store.idempotency_keys()
    keys.claim(
        "charge:j1",
        payload_hash=payload_fingerprint({}, "charge"),
        job_id="holder",
        lease_seconds=1,
    )
    hooks = LeaseEndsAfter(clock, waits=1)
    group = one_queue_group(spy.client, url)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"job_type": "charge", "payload": {}, "job_id": "j1"}),
    )
    worker = JobWorker(
        group,
        {"charge": JobHandler(lambda payload: None, idempotent=True)},
        should_stop=lambda: any(seen == "success" for seen, _ in hooks.seen),
        idle_wait_seconds=0,
        hooks=[hooks],
        idempotency_keys=keys,
    )
    thread = WorkerThread(worker)
    assert thread.join(WAIT * 2) == 0

    # The one copy came back in place: its receive count went up.
    assert hooks.seen == [("retry", 1), ("success", 2)]
    assert 1 in visibility_changes(spy)
    [failed] = events(log_events, "idempotency_wait_send_failed")
    assert "ServiceUnavailable" in failed["error"]
    store.close()
