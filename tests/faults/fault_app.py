"""The Flask app the fault tier's ``flask sqs-worker`` processes run.

Run as ``python -m flask --app tests.faults.fault_app:create_app sqs-worker``.
Set up by environment variables:

- ``FAULT_APP_ENDPOINT``: the SQS endpoint (the fault proxy).
- ``FAULT_APP_QUEUES``: JSON, the ``SQS_JOBS_QUEUES`` setting.
- ``FAULT_APP_RECORD_DIR``: each worker process appends one JSON line per
  handler event to ``runs-<pid>.jsonl`` there, one ``write`` per line on a
  file opened with ``O_APPEND``: a SIGKILL loses nothing already written.
- ``FAULT_APP_MAX_RECEIVE_BACKOFF``: when set, caps the receive-failure
  backoff (seconds) so a test of persistent failures takes seconds.

Every handler takes ``{"id": "<job id>", "ms": <work time>}`` and records
``start`` when called and ``done`` when its work is over (before returning, or
before raising on purpose). Handlers: ``work`` (succeeds), ``flaky`` (raises on
its first receive), ``always_fail`` (always raises: ends in the dead-letter
queue), ``non_retryable`` (raises ``NonRetryableError``) and ``exit`` (raises
``SystemExit``, which must not take the worker down).

Logs are structlog JSON lines on stdout.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
import typing as t

import structlog
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.worker import _receive_health as worker_module

_lock = threading.Lock()
_fd: int | None = None


def record(event: str, payload: dict[str, t.Any]) -> None:
    """Append one handler event to this process's record file."""
    global _fd
    line = json.dumps(
        {
            "ev": event,
            "id": payload.get("id"),
            "kind": current_job.job_type,
            "pid": os.getpid(),
            "t": time.time(),
            "mid": current_job.message_id,
            "rc": current_job.receive_count,
            "q": current_job.queue,
        }
    )
    data = (line + "\n").encode()
    with _lock:
        if _fd is None:
            path = os.path.join(
                os.environ["FAULT_APP_RECORD_DIR"], f"runs-{os.getpid()}.jsonl"
            )
            _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_fd, data)


def _work(payload: dict[str, t.Any]) -> None:
    record("start", payload)
    seconds = float(payload.get("ms", 0)) / 1000
    if seconds > 0:
        time.sleep(seconds)
    record("done", payload)


def configure_logging() -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
    )


def create_app() -> Flask:
    configure_logging()
    # `kill -USR1 <pid>` prints every thread's stack: how to diagnose a hang.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    backoff = os.environ.get("FAULT_APP_MAX_RECEIVE_BACKOFF")
    if backoff:
        worker_module.MAX_RECEIVE_BACKOFF = float(backoff)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=json.loads(os.environ["FAULT_APP_QUEUES"]),
        SQS_JOBS_ENDPOINT_URL=os.environ["FAULT_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
    )
    jobs = SQSJobs(app)

    @jobs.handler("work")
    def work(payload: dict[str, t.Any]) -> None:
        _work(payload)

    @jobs.handler("flaky")
    def flaky(payload: dict[str, t.Any]) -> None:
        _work(payload)
        if (current_job.receive_count or 1) <= 1:
            raise RuntimeError("flaky: failing on the first receive")

    @jobs.handler("always_fail")
    def always_fail(payload: dict[str, t.Any]) -> None:
        _work(payload)
        raise RuntimeError("always_fail: this job never succeeds")

    @jobs.handler("non_retryable")
    def non_retryable(payload: dict[str, t.Any]) -> None:
        _work(payload)
        raise NonRetryableError("non_retryable: no retry can fix this")

    @jobs.handler("exit")
    def exit_(payload: dict[str, t.Any]) -> None:
        _work(payload)
        raise SystemExit(3)

    return app
