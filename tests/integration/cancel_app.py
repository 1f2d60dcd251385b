"""A Flask app whose job runs until it is cancelled, for ``flask sqs-worker`` processes.

Run it as ``python -m flask --app tests.integration.cancel_app:create_app``.
Set up by env vars: ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUES`` (JSON), and
the store: ``TEST_APP_STORE_URL`` (SQL) or ``TEST_APP_DYNAMODB_TABLE`` (with
``AWS_ENDPOINT_URL_DYNAMODB`` saying where).

The ``long`` handler logs ``long_running`` once it runs, then loops until
``current_job.cancel_requested`` is set (at most a minute), and logs whether
``abort_requested`` was set with it.
"""

from __future__ import annotations

import os
import time
import typing as t

import structlog
from flask import Flask
from flask_sqs_jobs import current_job

from tests.integration.flask_test_app import configure_logging
from tests.integration.flask_test_app import jobs_on_env_store

log = structlog.get_logger("cancel_app")

#: How long ``long`` waits for its cancellation before giving up.
CANCEL_LIMIT_SECONDS = 60


def create_app() -> Flask:
    configure_logging()
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=os.environ["TEST_APP_QUEUES"],
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
    )
    jobs = jobs_on_env_store(app)
    jobs.init_app(app)

    @jobs.handler("long")
    def long(payload: dict[str, t.Any]) -> None:
        log.info("long_running", job_id=current_job.job_id)
        deadline = time.monotonic() + CANCEL_LIMIT_SECONDS
        while not current_job.cancel_requested.wait(0.05):
            if time.monotonic() > deadline:
                raise TimeoutError("the job was never cancelled")
        log.info("long_cancelled", aborted=current_job.abort_requested.is_set())

    return app
