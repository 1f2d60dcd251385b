"""Waiting, from inside a handler, for a unique key its job frees as it starts."""

from __future__ import annotations

import threading
import time
import typing as t

from flask_sqs_jobs import SQSJobs

from tests.engine.helpers import WAIT


def enqueue_once_free(jobs: SQSJobs, holder: str, **enqueue: t.Any) -> str:
    """``jobs.enqueue(**enqueue)`` until it is not a duplicate of ``holder``.

    The key is freed moments after its job starts (off the job's thread), so
    the first tries may still find it held; gives up (returning ``holder``)
    after :data:`WAIT` seconds.
    """
    deadline = time.monotonic() + WAIT
    while True:
        returned = jobs.enqueue(**enqueue)
        if returned != holder or time.monotonic() > deadline:
            return returned
        threading.Event().wait(0.01)
