"""Fixtures for the integrations' tests: a Flask app on a moto queue, and logs."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
import structlog
import structlog.testing
from flask import Flask
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import SQSJobs

from tests.contrib.helpers import JOB_TYPE
from tests.contrib.helpers import JobApp
from tests.contrib.helpers import MakeJobApp
from tests.log_capture import capture_logs
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


@pytest.fixture
def make_job_app(sqs: SQSClient) -> MakeJobApp:
    """Build a :class:`JobApp` on a moto queue, with ``middleware``."""
    url = create_queue(sqs, "jobs", visibility_timeout=30)

    def make(*middleware: JobMiddleware, eager: bool = False) -> JobApp:
        app = Flask(__name__)
        app.config.update(
            TESTING=True,
            SQS_JOBS_QUEUES={"default": {"url": url}},
            SQS_JOBS_IDLE_WAIT_SECONDS=0,
            SQS_JOBS_EAGER=eager,
        )
        jobs = SQSJobs(app, boto_client=sqs, middleware=middleware)
        job_app = JobApp(app, jobs)

        @jobs.handler(JOB_TYPE)
        def send_welcome_email(payload: dict[str, t.Any]) -> None:
            job_app.calls.append(payload)
            if job_app.probe is not None:
                job_app.probed.append(job_app.probe())
            if job_app.failure is not None:
                raise job_app.failure

        @app.post("/signup")
        def signup() -> dict[str, str]:
            with job_app.around_enqueue():
                message_id = jobs.enqueue("default", JOB_TYPE, {"user_id": 42})
            return {"message_id": message_id}

        return job_app

    return make


@pytest.fixture
def logs() -> cabc.Iterator[list[EventDict]]:
    """Captured structlog events, with the bound context merged in."""
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        yield events
