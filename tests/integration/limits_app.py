"""A Flask app whose handlers have limits, for ``flask sqs-worker`` subprocesses.

Run it as ``python -m flask --app tests.integration.limits_app:create_app``.
Set up by env vars: ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUES`` (JSON),
``TEST_APP_STORE_URL`` (or ``TEST_APP_DYNAMODB_TABLE``, with
``AWS_ENDPOINT_URL_DYNAMODB`` saying where) and ``TEST_APP_DIR``, a directory
shared with the test.

Every handler appends a line to ``starts`` when it starts and to ``ends``
when it returns (``<time> <job type> <tenant> <pid>``, one ``write`` of an
``O_APPEND`` file, so lines from several processes never mix).

- ``ping`` (``RateLimit("ping", 50, per=1)``) returns at once.
- ``report`` (``ConcurrencyLimit("tenant", 3, key=tenant)``) takes 0.3 s.
- ``hold`` (``ConcurrencyLimit("solo", 1, lease_seconds=3)``) runs until the
  test creates ``release-<n>``.
"""

from __future__ import annotations

import os
import pathlib
import time

from flask import Flask
from flask_sqs_jobs import ConcurrencyLimit
from flask_sqs_jobs import RateLimit

from tests.integration.flask_test_app import configure_logging
from tests.integration.flask_test_app import jobs_on_env_store

RATE = 50
PER_TENANT = 3
SOLO_LEASE = 3
#: How long ``hold`` waits for its release file before giving up.
RELEASE_LIMIT_SECONDS = 60


def note(path: pathlib.Path, job_type: str, tenant: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        line = f"{time.time():.6f} {job_type} {tenant} {os.getpid()}\n"
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def create_app() -> Flask:
    configure_logging()
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=os.environ["TEST_APP_QUEUES"],
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = jobs_on_env_store(app)
    shared = pathlib.Path(os.environ["TEST_APP_DIR"])

    @jobs.task(limits=[RateLimit("ping", RATE, per=1)])
    def ping(n: int) -> None:
        note(shared / "starts", "ping", "-")

    @jobs.task(
        limits=[ConcurrencyLimit("tenant", PER_TENANT, key=lambda p: p["tenant"])]
    )
    def report(tenant: str, n: int) -> None:
        note(shared / "starts", "report", tenant)
        time.sleep(0.3)
        note(shared / "ends", "report", tenant)

    @jobs.task(limits=[ConcurrencyLimit("solo", 1, lease_seconds=SOLO_LEASE)])
    def hold(n: int) -> None:
        note(shared / "starts", "hold", str(n))
        deadline = time.monotonic() + RELEASE_LIMIT_SECONDS
        while not (shared / f"release-{n}").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never released the job")
            time.sleep(0.02)

    jobs.init_app(app)
    return app
