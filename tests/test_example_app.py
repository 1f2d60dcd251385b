"""The example app: its views and handlers, and ``make demo`` end to end."""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import subprocess
import sys
import typing as t

import example_app
import pytest
from example_app import create_app
from example_app import handlers
from example_app.extensions import jobs
from flask import Flask
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs.testing import record_enqueued
from flask_sqs_jobs.testing import record_finished
from flask_sqs_jobs.testing import send_outbox
from flask_sqs_jobs.testing import work_off

from tests.support import create_queue

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

ROOT = pathlib.Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def _isolated_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """No emails sent yet, no ``FLASK_*`` settings from outside, and the
    example's structlog set-up (which would apply to the whole test process)
    left out."""
    monkeypatch.setattr(handlers, "SENT_EMAILS", set())
    monkeypatch.setattr(example_app, "configure_logging", lambda: None)
    for name in list(os.environ):
        if name.startswith("FLASK_"):
            monkeypatch.delenv(name)


@pytest.fixture
def store_url(tmp_path: pathlib.Path) -> str:
    """The example's database (its users and the job store) for one test."""
    return f"sqlite:///{tmp_path / 'example.db'}"


@pytest.fixture
def app(_isolated_example: None, store_url: str) -> Flask:
    """The example app in eager mode: every job runs once the sign-up commits.

    (pytest-flask's autouse fixtures ask for ``app`` before this module's own
    autouse fixture would run, hence the explicit dependency.)
    """
    return create_app(
        {"TESTING": True, "SQS_JOBS_EAGER": True, "SQS_JOBS_STORE_URL": store_url}
    )


def test_sign_up_enqueues_the_welcome_email_on_critical_and_the_report_on_reports(
    app: Flask, client: FlaskClient
) -> None:
    """The email was sent before (a repeated sign-up), so every job succeeds."""
    handlers.SENT_EMAILS.add("ada@example.com")

    with record_enqueued(app) as enqueued:
        response = client.post("/signup", data={"email": " ada@example.com "})

    assert response.status_code == 202
    assert [(j.queue, j.job_type, j.payload) for j in enqueued] == [
        ("critical", "send_welcome_email", {"email": "ada@example.com"}),
        ("reports", "build_signup_report", {"day": dt.date.today().isoformat()}),
    ]
    request_id = response.headers["X-Request-ID"]
    assert [j.correlation_fields for j in enqueued] == [{"request_id": request_id}] * 2


def test_the_first_attempt_of_the_welcome_email_raises(
    app: Flask, client: FlaskClient
) -> None:
    with (
        record_enqueued(app) as enqueued,
        record_finished(app) as finished,
        pytest.raises(ConnectionError, match="mail server busy"),
    ):
        client.post("/signup", data={"email": "ada@example.com"})

    assert [j.job_type for j in enqueued] == ["send_welcome_email"]
    assert [(f.outcome, type(f.exception)) for f in finished] == [
        ("retry", ConnectionError)
    ]
    assert set() == handlers.SENT_EMAILS


def test_sign_up_without_an_email_is_refused_and_enqueues_nothing(
    app: Flask, client: FlaskClient
) -> None:
    with record_enqueued(app) as enqueued:
        response = client.post("/signup", data={"email": "  "})

    assert response.status_code == 400
    assert response.json == {"error": "email is required"}
    assert enqueued == []


def test_an_order_with_a_declined_card_raises_non_retryable_error(
    app: Flask, client: FlaskClient
) -> None:
    with (
        record_finished(app) as finished,
        pytest.raises(NonRetryableError, match="card declined"),
    ):
        client.post("/orders", data={"card": "declined"})

    assert [(f.job.job_type, f.outcome) for f in finished] == [
        ("charge_card", "delete")
    ]


def test_an_order_with_a_good_card_charges_it(app: Flask, client: FlaskClient) -> None:
    with record_finished(app) as finished:
        response = client.post("/orders")

    assert response.status_code == 202
    assert [(f.job.payload, f.outcome) for f in finished] == [
        ({"amount": 1200, "card": "ok"}, "success")
    ]
    assert response.json == {"queued": finished[0].job.message_id}


def test_environment_variables_override_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("FLASK_SQS_JOBS_IDLE_WAIT_SECONDS", "3")
    monkeypatch.setenv("FLASK_SQS_JOBS_STORE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    monkeypatch.setenv("FLASK_SQS_JOBS_ENDPOINT_URL", "http://sqs.internal:9324")

    app = create_app()

    config = jobs.config(app)
    assert config.idle_wait_seconds == 3
    assert config.endpoint_url == "http://sqs.internal:9324"
    assert set(config.queues) == {"critical", "housekeeping", "reports"}


def test_the_example_app_has_the_worker_command(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["sqs-worker", "--help"])

    assert result.exit_code == 0
    assert "Run a worker for this app's job handlers." in result.output


class TestAgainstSQS:
    """Without eager mode the jobs go through (moto's) SQS and a worker."""

    @pytest.fixture
    def app(self, _isolated_example: None, sqs: SQSClient, store_url: str) -> Flask:
        create_queue(sqs, "example-critical")
        create_queue(sqs, "example-reports")
        app = create_app(
            {
                "TESTING": True,
                "SQS_JOBS_STORE_URL": store_url,
                "SQS_JOBS_ENDPOINT_URL": None,
                "SQS_JOBS_IDLE_WAIT_SECONDS": 0,
                # A failed welcome email is back at once instead of after the
                # retry backoff, so the retry runs in this test.
                "SQS_JOBS_QUEUES": {
                    "critical": {"name": "example-critical", "visibility_timeout": 0},
                    "reports": {"name": "example-reports"},
                },
            }
        )
        jobs.store(app).create_tables()
        return app

    def test_the_welcome_email_fails_once_then_is_sent_exactly_once(
        self, app: Flask, client: FlaskClient
    ) -> None:
        response = client.post("/signup", data={"email": "ada@example.com"})
        send_outbox(app)
        finished = work_off(app)

        assert response.status_code == 202
        emails = [
            (f.outcome, f.job.receive_count)
            for f in finished
            if f.job.job_type == "send_welcome_email"
        ]
        assert emails == [("retry", 1), ("success", 2)]
        assert {"ada@example.com"} == handlers.SENT_EMAILS
        reports = [f.outcome for f in finished if f.job.queue == "reports"]
        assert reports == ["success"]
        job_ids = {f.job.job_id for f in finished if f.job.queue == "critical"}
        assert response.json is not None
        assert job_ids == {response.json["queued"]}
        assert send_outbox(app) == 0  # nothing left in the outbox


@pytest.mark.integration
def test_the_demo_runs_end_to_end() -> None:
    """``make demo``: a local SQS server, the web app and a worker, as processes."""
    result = subprocess.run(
        [sys.executable, "-m", "example_app.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "demo passed" in result.stdout
