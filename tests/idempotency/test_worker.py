"""Idempotent handlers in a worker: duplicates, conflicts, leases, releases, TTL."""

from __future__ import annotations

import json
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import Outcome
from flask_sqs_jobs.engine.model._idempotency_keys import payload_fingerprint
from flask_sqs_jobs.engine.ops._metrics import PrometheusMetrics
from flask_sqs_jobs.store.sql import _idempotency as _sql_idempotency
from flask_sqs_jobs.store.sql._tables import idempotency

from tests.engine.helpers import events
from tests.engine.helpers import poll_until
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.idempotency.conftest import Finished
from tests.idempotency.conftest import make_store_app
from tests.idempotency.conftest import RunWorker
from tests.idempotency.test_sql_keys import Clock
from tests.support import create_queue
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


def enqueue(app: Flask, jobs: SQSJobs, payload: Payload, job_id: str) -> None:
    with app.app_context():
        jobs.enqueue("default", "charge", payload, job_id=job_id)


def key_row(app: Flask, jobs: SQSJobs, key: str) -> t.Any:
    with jobs.store(app).engine.connect() as connection:  # type: ignore[attr-defined]
        return connection.execute(
            sa.select(idempotency).where(idempotency.c.key == key)
        ).first()


def done(n: int) -> t.Callable[[Finished], bool]:
    return lambda finished: finished.count() >= n


def test_a_duplicate_delivery_runs_once_and_is_then_a_duplicate(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    sqs: SQSClient,
    queue_url: str,
) -> None:
    runs: list[Payload] = []

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> dict[str, int]:
        runs.append(payload)
        return {"charged": payload["amount"]}

    enqueue(store_app, jobs, {"amount": 5}, "order-1")
    enqueue(store_app, jobs, {"amount": 5}, "order-1")
    metrics = PrometheusMetrics()
    finished = run_worker(done(2), hooks=[metrics])

    assert runs == [{"amount": 5}]
    assert finished.values() == ["success", "duplicate"]
    counted = metrics.registry.get_sample_value(
        "sqs_jobs_jobs_total",
        {"queue": "default", "job_type": "charge", "outcome": "duplicate"},
    )
    assert counted == 1
    assert message_count(sqs, queue_url) == 0
    row = key_row(store_app, jobs, "charge:order-1")
    assert row.status == "completed"
    assert json.loads(row.result) == {"charged": 5}


def test_a_key_from_the_payload_makes_other_job_ids_duplicates(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[Payload] = []

    @jobs.handler("charge", idempotency_key=lambda payload: f"order:{payload['order']}")
    def charge(payload: Payload) -> None:
        runs.append(payload)

    enqueue(store_app, jobs, {"order": 7}, "first")
    enqueue(store_app, jobs, {"order": 7}, "second")
    finished = run_worker(done(2))

    assert len(runs) == 1
    assert sorted(finished.values()) == ["duplicate", "success"]
    assert key_row(store_app, jobs, "charge:order:7").job_id in {"first", "second"}


def test_the_same_key_with_another_payload_is_dead_lettered_as_a_conflict(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    sqs: SQSClient,
    dlq_url: str,
    log_events: list[EventDict],
) -> None:
    runs: list[Payload] = []

    @jobs.handler("charge", idempotency_key=lambda payload: str(payload["order"]))
    def charge(payload: Payload) -> None:
        runs.append(payload)

    enqueue(store_app, jobs, {"order": 1, "amount": 5}, "a")
    enqueue(store_app, jobs, {"order": 1, "amount": 6}, "b")
    finished = run_worker(done(2))

    assert len(runs) == 1
    assert sorted(finished.values()) == ["dead_lettered", "success"]
    [dead] = visible_messages(sqs, dlq_url)
    reason = json.loads(dead["MessageAttributes"]["dead_letter"]["StringValue"])
    assert reason["error_type"] == "IdempotencyConflictError"
    assert "different payload" in reason["error"]
    [line] = [e for e in events(log_events, "job_finished") if e.get("error_type")]
    assert line["idempotency"] == "conflict"


def test_a_conflict_without_a_dead_letter_queue_is_deleted(
    jobs: SQSJobs, sqs: SQSClient, store_url: str
) -> None:
    url = create_queue(sqs, "no-dlq")
    app = make_store_app(jobs, store_url, "no-dlq")

    @jobs.handler("charge", idempotency_key=lambda payload: "same")
    def charge(payload: Payload) -> None:
        pass

    enqueue(app, jobs, {"n": 1}, "a")
    enqueue(app, jobs, {"n": 2}, "b")
    finished = Finished()
    worker = jobs.create_worker(
        app, should_stop=lambda: finished.count() >= 2, hooks=[finished]
    )
    assert worker.run() == 0
    assert sorted(finished.values()) == ["delete", "success"]
    assert message_count(sqs, url) == 0
    jobs.store(app).close()


def test_a_key_in_progress_elsewhere_is_retried_when_that_lease_ends(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[Payload] = []
    clock = Clock()
    monkeypatch.setattr(_sql_idempotency, "_now", clock)

    class LeaseEndsAfterTheRetry(Hooks):
        def job_finished(
            self, job: Job, outcome: Outcome, *args: t.Any, **kwargs: t.Any
        ) -> None:
            if outcome is Outcome.RETRY:
                clock.advance(2)

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        runs.append(payload)

    payload = {"amount": 1}
    other = jobs.store(store_app).idempotency_keys()
    other.claim(
        "charge:j1",
        payload_hash=payload_fingerprint(payload, "charge"),
        job_id="elsewhere",
        lease_seconds=2,
    )
    enqueue(store_app, jobs, payload, "j1")
    finished = run_worker(
        lambda f: "success" in f.values(), hooks=[LeaseEndsAfterTheRetry()]
    )

    assert finished.values() == ["retry", "success"]
    assert runs == [payload]
    first = events(log_events, "job_finished")[0]
    assert first["outcome"] == "retry"
    assert first["idempotency"] == "in_progress"
    assert first["retry_in_seconds"] == 2


def test_a_failed_handler_releases_its_key_so_the_retry_runs(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[int | None] = []

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        runs.append(current_job.receive_count)
        if len(runs) == 1:
            raise RetryJob(0)

    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(2))

    assert finished.values() == ["retry", "success"]
    assert runs == [1, 2]


charges = sa.Table(
    "charges",
    sa.MetaData(),
    sa.Column("order_id", sa.Integer, primary_key=True),
)


@pytest.fixture
def engine(store_app: Flask, jobs: SQSJobs) -> sa.Engine:
    """The store's engine, with a ``charges`` table for the handlers' own writes."""
    engine: sa.Engine = jobs.store(store_app).engine  # type: ignore[attr-defined]
    charges.create(engine)
    return engine


def charged(engine: sa.Engine) -> list[tuple[int]]:
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(sa.select(charges.c.order_id))]


def test_the_completion_commits_with_the_handlers_own_writes(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker, engine: sa.Engine
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        current_job.session.execute(charges.insert().values(order_id=payload["order"]))

    enqueue(store_app, jobs, {"order": 3}, "j1")
    enqueue(store_app, jobs, {"order": 3}, "j1")
    finished = run_worker(done(2))

    assert finished.values() == ["success", "duplicate"]
    assert charged(engine) == [(3,)]
    assert key_row(store_app, jobs, "charge:j1").status == "completed"


def test_a_failing_commit_leaves_neither_the_writes_nor_the_key(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
    engine: sa.Engine,
) -> None:

    def refuse(session: t.Any) -> None:
        raise RuntimeError("the database refused the commit")

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        session = current_job.session
        session.execute(charges.insert().values(order_id=1))
        sa.event.listen(session, "before_commit", refuse)

    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(1))

    assert finished.values() == ["retry"]
    assert charged(engine) == []
    assert key_row(store_app, jobs, "charge:j1") is None
    [line] = events(log_events, "job_commit_failed")
    assert "refused the commit" in line["error"]


def test_a_completed_key_runs_again_after_its_ttl(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(_sql_idempotency, "_now", clock)
    runs: list[Payload] = []

    @jobs.handler("charge", idempotent=True, idempotency_ttl_seconds=60)
    def charge(payload: Payload) -> None:
        runs.append(payload)

    enqueue(store_app, jobs, {}, "j1")
    assert run_worker(done(1)).values() == ["success"]
    clock.advance(59)
    enqueue(store_app, jobs, {}, "j1")
    assert run_worker(done(1)).values() == ["duplicate"]
    clock.advance(1)
    enqueue(store_app, jobs, {}, "j1")
    assert run_worker(done(1)).values() == ["success"]
    assert len(runs) == 2


def test_the_heartbeat_renews_the_key_of_a_job_longer_than_the_visibility(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    seen: list[t.Any] = []

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        seen.append(key_row(store_app, jobs, "charge:j1").lease_expires_at)
        started = time.monotonic()
        # Outlive the queue's 3 s visibility timeout: only renewals keep the key.
        assert poll_until(lambda: time.monotonic() - started > 4.5)
        seen.append(key_row(store_app, jobs, "charge:j1").lease_expires_at)

    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(1))

    assert finished.values() == ["success"]
    first, last = seen
    # Unrenewed, the lease would still end where the claim put it.
    assert (last - first).total_seconds() > 1.5


def test_concurrent_duplicates_never_run_at_the_same_time(
    store_app: Flask, jobs: SQSJobs
) -> None:
    lock = threading.Lock()
    running, overlaps, runs = [0], [0], [0]
    finished = Finished()

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        with lock:
            running[0] += 1
            runs[0] += 1
            overlaps[0] = max(overlaps[0], running[0])
        try:
            # Hold the key until another worker has found it in progress.
            assert finished.wait_for(lambda: "retry" in finished.values())
        finally:
            with lock:
                running[0] -= 1

    copies = 6
    for _ in range(copies):
        enqueue(store_app, jobs, {}, "same")

    def settled() -> bool:
        outcomes = finished.values()
        return outcomes.count("success") + outcomes.count("duplicate") == copies

    workers = [
        jobs.create_worker(
            store_app, concurrency=3, should_stop=settled, hooks=[finished]
        )
        for _ in range(2)
    ]
    threads = [WorkerThread(worker) for worker in workers]
    assert poll_until(settled, WAIT * 2)
    for thread in threads:
        assert thread.join(WAIT) == 0
    assert runs == [1]
    assert overlaps == [1]
    assert finished.values().count("success") == 1


def test_a_store_failing_at_the_claim_retries_the_job_without_running_it(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
) -> None:
    runs: list[Payload] = []
    jobs.handler("charge", idempotent=True)(runs.append)
    idempotency.drop(jobs.store(store_app).engine)  # type: ignore[attr-defined]
    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(1))

    assert finished.values() == ["retry"]
    assert runs == []
    [failed] = events(log_events, "idempotency_claim_failed")
    assert "sqs_jobs_idempotency" in failed["error"]


def test_a_result_over_64_kib_is_not_kept_and_said_once(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> str:
        return "x" * (64 * 1024)  # its JSON has two quotes more

    enqueue(store_app, jobs, {}, "big-1")
    enqueue(store_app, jobs, {}, "big-2")
    finished = run_worker(done(2))

    assert finished.values() == ["success", "success"]
    for key in ("charge:big-1", "charge:big-2"):
        row = key_row(store_app, jobs, key)
        assert row.status == "completed"
        assert row.result is None
    [warning] = events(log_events, "idempotency_result_not_kept")
    assert warning["reason"] == f"{64 * 1024 + 2} bytes"


def test_a_failed_handlers_writes_are_rolled_back_before_its_key_is_released(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
    engine: sa.Engine,
) -> None:
    attempts: list[int] = []

    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        attempts.append(len(attempts) + 1)
        current_job.session.execute(charges.insert().values(order_id=len(attempts)))
        if len(attempts) == 1:
            raise RetryJob(0)

    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(2))

    assert finished.values() == ["retry", "success"]
    # On SQLite the session's open write would have blocked the release.
    assert events(log_events, "idempotency_release_failed") == []
    assert charged(engine) == [(2,)]


def test_a_key_lost_while_running_rolls_the_handlers_writes_back(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
    engine: sa.Engine,
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        # Another worker takes the key over (as after this lease had ended).
        with engine.begin() as connection:
            connection.execute(idempotency.update().values(token="another-holder"))
        current_job.session.execute(charges.insert().values(order_id=1))

    enqueue(store_app, jobs, {}, "j1")
    finished = run_worker(done(1))

    assert finished.values() == ["retry"]
    [line] = events(log_events, "job_commit_failed")
    assert "no longer held by this job" in line["error"]
    assert charged(engine) == []
    assert key_row(store_app, jobs, "charge:j1").token == "another-holder"
