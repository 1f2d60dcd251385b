"""A Flask app with an idempotent handler, for ``flask sqs-worker`` subprocesses.

Run it as ``python -m flask --app tests.integration.idempotent_app:create_app``.
Set up by env vars: ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUES`` (JSON),
``TEST_APP_STORE_URL`` and ``TEST_APP_DIR``, a directory shared with the test.

The ``charge`` handler is idempotent (keyed by job id). It marks itself running
with a file ``running-<pid>-<thread>`` in that directory, notes an ``overlap``
file if another run's marker exists, waits until the test creates ``release``,
then appends one line to ``runs`` and removes its marker.
"""

from __future__ import annotations

import os
import pathlib
import threading
import time
import typing as t

from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs

from tests.integration.flask_test_app import configure_logging

#: How long ``charge`` waits for the release file before giving up.
RELEASE_LIMIT_SECONDS = 60


def create_app() -> Flask:
    configure_logging()
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=os.environ["TEST_APP_QUEUES"],
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
        SQS_JOBS_STORE_URL=os.environ["TEST_APP_STORE_URL"],
    )
    jobs = SQSJobs(app)
    shared = pathlib.Path(os.environ["TEST_APP_DIR"])

    @jobs.handler("charge", idempotent=True)
    def charge(payload: dict[str, t.Any]) -> None:
        marker = shared / f"running-{os.getpid()}-{threading.get_ident()}"
        marker.touch()
        try:
            if len(list(shared.glob("running-*"))) > 1:
                (shared / "overlap").touch()
            deadline = time.monotonic() + RELEASE_LIMIT_SECONDS
            while not (shared / "release").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the test never released the job")
                time.sleep(0.02)
            with open(shared / "runs", "a") as runs:
                runs.write(f"{current_job.job_id} {os.getpid()}\n")
        finally:
            marker.unlink()

    return app
