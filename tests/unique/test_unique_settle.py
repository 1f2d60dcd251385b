"""When a worker frees a unique job's key: not while the job waits for a retry,
and once it is settled for good, whatever its outcome."""

from __future__ import annotations

import typing as t

from flask import Flask
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import SQSJobs

from tests.idempotency.conftest import RunWorker

Payload: t.TypeAlias = dict[str, t.Any]


def test_a_job_waiting_for_its_retry_keeps_its_key(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    attempts: list[str] = []

    def flaky(payload: Payload) -> None:
        # On its second attempt, the key is still this job's.
        if attempts:
            attempts.append(jobs.enqueue("default", "flaky", {}, unique_key="k"))
            return
        attempts.append("first")
        raise RuntimeError("try again")

    jobs.handler("flaky")(flaky)
    with store_app.app_context():
        jobs.enqueue(
            "default",
            "flaky",
            {},
            unique_key="k",
            unique_until="finished",
            job_id="j-1",
        )
    finished = run_worker(lambda f: f.count() >= 2)
    with store_app.app_context():
        after = jobs.enqueue("default", "flaky", {}, unique_key="k", job_id="j-2")

    assert finished.values() == ["retry", "success"]
    assert attempts == ["first", "j-1"]
    assert after != "j-1"  # sent: the key was freed when the job succeeded


def test_a_job_deleted_unrun_for_good_frees_its_key(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    def refuse(payload: Payload) -> None:
        raise NonRetryableError("bad input")

    jobs.handler("refuse")(refuse)
    with store_app.app_context():
        jobs.enqueue(
            "default",
            "refuse",
            {},
            unique_key="k",
            unique_until="finished",
            job_id="j-1",
        )
        assert jobs.enqueue("default", "refuse", {}, unique_key="k") == "j-1"
    finished = run_worker(lambda f: f.count() >= 1)
    with store_app.app_context():
        after = jobs.enqueue("default", "refuse", {}, unique_key="k", job_id="j-2")

    assert finished.values() == ["delete"]
    assert after != "j-1"


def test_enqueue_many_skips_the_duplicates_in_place(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context():
        jobs.enqueue("default", "report", {}, unique_key="a", job_id="j-a")
        returned = jobs.enqueue_many(
            "default",
            [
                {"job_type": "report", "payload": {}, "unique_key": "a"},
                {
                    "job_type": "report",
                    "payload": {},
                    "unique_key": "b",
                    "job_id": "j-b",
                },
                ("report", {"plain": True}),
                {"job_type": "report", "payload": {}, "unique_key": "b"},
            ],
        )
    assert returned[0] == "j-a"
    assert returned[3] == "j-b"
    assert len({returned[1], returned[2]} - {"j-a", "j-b"}) == 2  # two MessageIds


def test_eager_mode_frees_the_key_as_the_job_runs(
    make_app: t.Any, jobs: SQSJobs, tmp_path: t.Any
) -> None:
    runs: list[Payload] = []
    jobs.handler("report")(runs.append)
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"default": {"name": "app-default"}},
            "SQS_JOBS_EAGER": True,
            "SQS_JOBS_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
            "SQS_JOBS_RECORD_JOBS": False,
        }
    )
    jobs.store(app).create_tables()
    with app.app_context():
        jobs.enqueue("default", "report", {"n": 1}, unique=True)
        jobs.enqueue("default", "report", {"n": 1}, unique=True)
    jobs.store(app).close()
    assert runs == [{"n": 1}, {"n": 1}]
