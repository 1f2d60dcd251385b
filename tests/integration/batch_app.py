"""A Flask app with a batch's tasks, for ``flask sqs-worker`` subprocesses.

Run it as ``python -m flask --app tests.integration.batch_app:create_app``.
Set up by env vars: ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUES`` (JSON),
``TEST_APP_STORE_URL`` and ``TEST_APP_DIR``, a directory shared with the test.

``child`` appends ``<n> <pid>`` to ``runs`` and takes a little while, so a
worker killed during the batch holds children; ``on_done`` appends its label
and batch id to ``callbacks``.
"""

from __future__ import annotations

import os
import pathlib
import time

from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.integration.helpers import store_app

#: How long a child works: long enough for a kill to land while children run.
CHILD_SECONDS = 0.1


jobs = SQSJobs()


def _shared() -> pathlib.Path:
    return pathlib.Path(os.environ["TEST_APP_DIR"])


@jobs.task
def child(n: int) -> int:
    with open(_shared() / "runs", "a") as runs:
        runs.write(f"{n} {os.getpid()}\n")
    time.sleep(CHILD_SECONDS)
    return n


@jobs.task
def on_done(batch_id: str, label: str) -> None:
    with open(_shared() / "callbacks", "a") as callbacks:
        callbacks.write(f"{label} {batch_id}\n")


def create_app() -> Flask:
    app: Flask = store_app(__name__, RECORD_JOBS=False)
    jobs.init_app(app)
    return app
