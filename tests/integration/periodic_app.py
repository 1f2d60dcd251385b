"""A Flask app with one every-minute periodic job, for ``flask sqs-worker`` tests.

Run it as ``python -m flask --app tests.integration.periodic_app:create_app ...``.

- ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUES``, ``TEST_APP_RECORD_FILE``: as in
  ``flask_test_app``; the ``every_minute`` job records its job id, tick and pid.
- ``TEST_APP_SCHEDULE_QUEUE``: the logical queue of the schedule (``default``).
- ``TEST_APP_CLOCK_OFFSET``: seconds added to the scheduler's clock, so a test
  can put a minute boundary a few seconds ahead instead of waiting for one.
- ``TEST_APP_STORE_URL``: ``SQS_JOBS_STORE_URL``; ``TEST_APP_DYNAMODB_TABLE``: a
  ``DynamoDBStore`` on that table instead (``AWS_ENDPOINT_URL_DYNAMODB`` says where).
- ``TEST_APP_PAUSE_AFTER_CLAIM``: when set, the worker logs ``tick_claimed`` after
  claiming a tick and never sends it (the test then kills it).
- ``TEST_APP_STALE_AFTER``: how old a DynamoDB claim left pending must be
  before another worker sends it.
- ``TEST_APP_HOLD_FILE``: the job waits (up to a minute) until this file
  exists before it records and returns, so its message stays on the queue.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import threading
import time
import typing as t

import structlog
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.periodic import _claims as _schedule_claims
from flask_sqs_jobs.periodic import _dynamodb_claims
from flask_sqs_jobs.periodic import _scheduler
from flask_sqs_jobs.store import DynamoDBStore

from tests.integration.flask_test_app import configure_logging
from tests.integration.flask_test_app import record

log = structlog.get_logger("periodic_app")


def _shift_clock(offset: float) -> None:
    real = _scheduler.utc_now

    def shifted() -> dt.datetime:
        return real() + dt.timedelta(seconds=offset)

    _scheduler.utc_now = shifted


def _pause_after_claim() -> None:
    log.info("tick_claimed")
    threading.Event().wait()


def _wait_for(path: pathlib.Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def create_app() -> Flask:
    configure_logging()
    if offset := os.environ.get("TEST_APP_CLOCK_OFFSET"):
        _shift_clock(float(offset))
    if os.environ.get("TEST_APP_PAUSE_AFTER_CLAIM"):
        _schedule_claims.after_claim = _pause_after_claim
    if stale := os.environ.get("TEST_APP_STALE_AFTER"):
        _dynamodb_claims.STALE_AFTER_SECONDS = float(stale)
    table = os.environ.get("TEST_APP_DYNAMODB_TABLE")
    jobs = SQSJobs(store=DynamoDBStore(table) if table else None)

    @jobs.periodic(
        "every_minute",
        cron="* * * * *",
        queue=os.environ.get("TEST_APP_SCHEDULE_QUEUE", "default"),
    )
    def every_minute(payload: dict[str, t.Any]) -> None:
        if hold := os.environ.get("TEST_APP_HOLD_FILE"):
            _wait_for(pathlib.Path(hold))
        scheduled_for = current_job.scheduled_for
        record(
            {
                "kind": "job",
                "job_id": current_job.job_id,
                "scheduled_for": scheduled_for and scheduled_for.isoformat(),
                "pid": os.getpid(),
            }
        )

    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=os.environ["TEST_APP_QUEUES"],
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
        SQS_JOBS_STORE_URL=os.environ.get("TEST_APP_STORE_URL"),
    )
    jobs.init_app(app)
    return app
