"""A job cancelled from its page (confirmed, CSRF-protected); priority levels listed."""

from __future__ import annotations

import pathlib
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from .conftest import csrf_token

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp


@pytest.fixture
def app(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, tmp_path: pathlib.Path
) -> t.Iterator[Flask]:
    jobs = SQSJobs(boto_client=sqs)
    app = make_dashboard_app(
        config={"SQS_JOBS_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}, jobs=jobs
    )
    jobs.store(app).create_tables()
    with app.app_context():
        jobs.handler("report")(lambda payload: None)
        jobs.enqueue("default", "report", {}, job_id="job-7")
        yield app
    jobs.store(app).close()


def _tombstoned(app: Flask) -> bool:
    store = app.extensions["sqs_jobs"].store(app)
    return "job-7" in store.cancellations().cancelled(["job-7"])


def test_the_job_page_offers_the_cancel_action_for_an_unfinished_job(
    app: Flask,
) -> None:
    page = app.test_client().get("/jobs/jobs/job-7").get_data(as_text=True)
    assert 'id="cancel-job"' in page
    assert 'action="/jobs/jobs/job-7/cancel"' in page


def test_cancelling_asks_for_a_confirmation_then_cancels(app: Flask) -> None:
    client: FlaskClient = app.test_client()
    token = csrf_token(client, "/jobs/jobs/job-7")

    asked = client.post("/jobs/jobs/job-7/cancel", data={"csrf_token": token})
    assert asked.status_code == 200
    assert 'id="confirm"' in asked.get_data(as_text=True)
    assert not _tombstoned(app)

    done = client.post(
        "/jobs/jobs/job-7/cancel", data={"csrf_token": token, "confirmed": "yes"}
    )
    assert done.status_code == 200
    assert 'id="cancelled"' in done.get_data(as_text=True)
    assert _tombstoned(app)
    assert app.extensions["sqs_jobs"].cancel("job-7") is True  # still not finished


def test_a_post_without_the_csrf_token_cancels_nothing(app: Flask) -> None:
    refused = app.test_client().post(
        "/jobs/jobs/job-7/cancel", data={"confirmed": "yes"}
    )
    assert refused.status_code == 400
    assert "CSRF" in refused.get_data(as_text=True)
    assert not _tombstoned(app)


def test_a_finished_or_unknown_job_is_not_cancelled(app: Flask) -> None:
    from flask_sqs_jobs.testing import work_off

    work_off(app)
    client: FlaskClient = app.test_client()
    page = client.get("/jobs/jobs/job-7").get_data(as_text=True)
    assert 'id="cancel-job"' not in page
    token = csrf_token(client, "/jobs/queues/default/dead-letters")
    for job_id in ("job-7", "nobody"):
        answer = client.post(
            f"/jobs/jobs/{job_id}/cancel",
            data={"csrf_token": token, "confirmed": "yes"},
        )
        assert 'id="not-cancelled"' in answer.get_data(as_text=True)
    assert not _tombstoned(app)


def test_the_queues_page_shows_each_priority_level(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    from tests.support import create_queue

    for level in range(2):
        create_queue(sqs, f"dash-reports-p{level}")
    app = make_dashboard_app(
        config={
            "SQS_JOBS_QUEUES": {
                "default": {"name": "dash-default"},
                "reports": {"name": "dash-reports", "priority_levels": 2},
            }
        }
    )
    with app.app_context():
        app.extensions["sqs_jobs"].enqueue("reports", "build", {}, priority=0)
    data = app.test_client().get("/jobs/", headers={"Accept": "application/json"})
    counts = {q["queue"]: q["visible"] for q in data.get_json()["queues"]}
    assert counts == {"default": 0, "reports-p0": 1, "reports-p1": 0}
