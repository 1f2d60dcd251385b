"""``SQS_JOBS_RECORD_MODE``: every job, only the failures, or a share of job ids."""

from __future__ import annotations

import collections.abc as cabc
import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import Retry
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store.records._mode import sampled
from flask_sqs_jobs.testing import work_off

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def make(
    store: JobStore, sqs: SQSClient, app_config: dict[str, t.Any]
) -> cabc.Callable[[object], tuple[Flask, SQSJobs]]:
    dead_letters = create_queue(sqs, "mode-dead-letters")
    create_queue(sqs, "mode-jobs", dead_letter_url=dead_letters, max_receive_count=5)

    def make(mode: object) -> tuple[Flask, SQSJobs]:
        jobs = SQSJobs(store=store)

        @jobs.handler("ok")
        def ok(payload: dict[str, t.Any]) -> str:
            return "done"

        @jobs.handler("refused")
        def refused(payload: dict[str, t.Any]) -> None:
            raise NonRetryableError("the card was declined")

        @jobs.handler("flaky", retry=Retry(2, backoff_seconds=1, jitter=False))
        def flaky(payload: dict[str, t.Any]) -> None:
            raise RuntimeError("the service is down")

        app = Flask(__name__)
        queues = {"default": {"name": "mode-jobs"}}
        app.config.update({**app_config, "SQS_JOBS_QUEUES": queues})
        app.config["SQS_JOBS_RECORD_MODE"] = mode
        jobs.init_app(app)
        return app, jobs

    return make


def test_failures_mode_records_only_jobs_that_end_failed_or_dead_lettered(
    make: cabc.Callable[[object], tuple[Flask, SQSJobs]],
) -> None:
    app, jobs = make("failures")
    with app.app_context():
        jobs.enqueue("default", "ok", {}, job_id="ok-1")
        jobs.enqueue("default", "refused", {}, job_id="refused-1")
        jobs.enqueue("default", "flaky", {}, job_id="flaky-1")
        work_off(app, max_jobs=10)

        assert jobs.get_job("ok-1") is None
        refused = jobs.get_job("refused-1")
        assert refused is not None
        assert (refused.status, refused.attempts) == ("failed", 1)
        assert "the card was declined" in (refused.error or "")
        # Its first attempt failed and was retried: nothing recorded yet.
        assert jobs.get_job("flaky-1") is None
        # Its second and last attempt fails too: one record, of both attempts.
        deadline = time.monotonic() + 30
        while (flaky := jobs.get_job("flaky-1")) is None:
            assert time.monotonic() < deadline, "the retry never came back"
            work_off(app, max_jobs=1)
        assert (flaky.status, flaky.attempts) == ("dead_lettered", 2)
        assert flaky.finished_at is not None


def test_a_share_records_the_jobs_its_hash_picks_wholly_and_no_others(
    make: cabc.Callable[[object], tuple[Flask, SQSJobs]],
) -> None:
    app, jobs = make(0.5)
    ids = [f"job-{n}" for n in range(40)]
    picked = {job_id for job_id in ids if sampled(job_id, 0.5)}
    assert 5 < len(picked) < 35  # the hash spreads ids, it does not pick all or none
    with app.app_context():
        for job_id in ids:
            jobs.enqueue("default", "ok", {}, job_id=job_id)
        work_off(app, max_jobs=40)
        found = {job_id: jobs.get_job(job_id) for job_id in ids}
    assert {job_id for job_id, rec in found.items() if rec is not None} == picked
    assert all(found[job_id].status == "succeeded" for job_id in picked)  # type: ignore[union-attr]


def test_all_is_the_default_and_records_every_job(
    make: cabc.Callable[[object], tuple[Flask, SQSJobs]],
) -> None:
    app, jobs = make("all")
    with app.app_context():
        jobs.enqueue("default", "ok", {}, job_id="every-1")
        work_off(app, max_jobs=1)
        found = jobs.get_job("every-1")
    assert found is not None
    assert found.status == "succeeded"


@pytest.mark.parametrize("value", ["some", 0, 1.5, -0.1, True, "nan", None, [0.5]])
def test_a_bad_mode_is_refused_naming_the_setting_and_the_choices(
    value: object, app_config: dict[str, t.Any]
) -> None:
    app = Flask(__name__)
    app.config.update({**app_config, "SQS_JOBS_RECORD_MODE": value})
    with pytest.raises(ValueError, match='RECORD_MODE must be "all"') as error:
        SQSJobs(app)
    assert '"failures"' in str(error.value)


@pytest.mark.parametrize(
    ("value", "kept"), [("0.25", 0.25), (1, 1.0), ("failures", "failures")]
)
def test_a_mode_from_the_environment_is_read(
    value: object, kept: object, app_config: dict[str, t.Any]
) -> None:
    app = Flask(__name__)
    app.config.update({**app_config, "SQS_JOBS_RECORD_MODE": value})
    jobs = SQSJobs(app)
    with app.app_context():
        assert jobs.parts().config.record_mode == kept
