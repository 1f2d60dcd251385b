"""Failed jobs run again from their records: the same job id, a new attempt."""

from __future__ import annotations

import typing as t

from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store.records import retry_records
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp


def test_a_failed_job_keeps_its_payload_and_runs_again_as_a_new_attempt(
    store_app: Flask, jobs: SQSJobs
) -> None:
    attempts: list[tuple[str | None, int | None, dict[str, t.Any]]] = []

    @jobs.task()
    def charge(order_id: int) -> str:
        attempts.append(
            (current_job.job_id, current_job.attempt, {"order_id": order_id})
        )
        if len(attempts) == 1:
            raise NonRetryableError("card declined")
        return "paid"

    enqueued = charge.options(tags=["order:7"]).enqueue(order_id=7)
    work_off(store_app)
    failed = jobs.get_job(enqueued.job_id)
    assert failed is not None
    assert (failed.status, failed.payload, failed.tags) == (
        "failed",
        {"order_id": 7},
        ("order:7",),
    )

    report = retry_records(jobs.store(), jobs.queue_group(), [failed])
    assert report.sent == [enqueued.job_id]
    queued = jobs.get_job(enqueued.job_id)
    assert queued is not None
    assert (queued.status, queued.attempts) == ("queued", 0)

    work_off(store_app)
    assert attempts == [
        (enqueued.job_id, 1, {"order_id": 7}),
        (enqueued.job_id, 1, {"order_id": 7}),
    ]
    done = jobs.get_job(enqueued.job_id)
    assert done is not None
    assert (done.status, done.result, done.payload, done.tags) == (
        "succeeded",
        "paid",
        None,
        ("order:7",),
    )


def test_a_record_that_did_not_fail_or_kept_no_payload_is_not_sent(
    make_app: MakeApp, jobs: SQSJobs, app_config: dict[str, t.Any], store_url: str
) -> None:
    off = {"SQS_JOBS_RECORD_FAILED_PAYLOADS": False, "SQS_JOBS_STORE_URL": store_url}
    app = make_app(config={**app_config, **off})
    jobs.store(app).create_tables()
    with app.app_context():

        @jobs.handler("fail")
        def fail(payload: dict[str, t.Any]) -> None:
            raise NonRetryableError("no")

        @jobs.handler("ok")
        def ok(payload: dict[str, t.Any]) -> None:
            pass

        jobs.enqueue("default", "fail", {"secret": "x"}, job_id="f-1")
        jobs.enqueue("default", "ok", {}, job_id="ok-1")
        work_off(app)
        records = [jobs.get_job("f-1"), jobs.get_job("ok-1")]
        assert records[0] is not None
        assert records[0].payload is None
        report = retry_records(jobs.store(), jobs.queue_group(), records)  # type: ignore[arg-type]
        assert report.sent == []
        assert "payload was not kept" in report.skipped["f-1"]
        assert "it is succeeded" in report.skipped["ok-1"]
        assert work_off(app) == []
    jobs.store(app).close()
