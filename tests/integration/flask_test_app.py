"""A Flask app for the ``flask sqs-worker`` subprocess tests, set up by env vars.

Run it as ``python -m flask --app tests.integration.flask_test_app:create_app ...``.

- ``TEST_APP_ENDPOINT``: the SQS endpoint URL.
- ``TEST_APP_QUEUES``: JSON, the ``SQS_JOBS_QUEUES`` setting.
- ``TEST_APP_RECORD_FILE``: where the app appends one JSON line per job it ran
  (``"kind": "job"``) and per app context torn down (``"kind": "teardown"``).
- ``TEST_APP_MAX_RECEIVE_BACKOFF``: shrinks the worker's receive-failure backoff
  cap, so that the receive-failure tests finish quickly.
- ``TEST_APP_STORE_URL``: when set, the ``SQS_JOBS_STORE_URL`` setting.
- ``TEST_APP_JSON_LOGS``: when set, structlog renders JSON lines on stdout. Only
  the worker process sets it: configuring structlog in the test process would
  change logging for every test there.

Handlers: ``record`` (log ``job_recorded``, record the job), ``echo``
(return ``{"echo": payload}``), ``block`` (log
``block_started``, wait until the file named by the payload's ``release``
exists, then record), ``fail`` (record, then raise ``RuntimeError``),
``fixable`` (record, then raise ``RuntimeError`` until the file named by the
payload's ``fixed`` exists) and ``abortable`` (log ``abortable_started``, wait
for the payload's ``release`` file like ``block``, but log
``abort_requested_seen`` and return as soon as ``current_job.abort_requested``
is set); ``patient_abortable`` is ``abortable`` with a 600 s limit of its own.
Tasks (``@jobs.task`` on ``default``, retried after 1 s, then 2 s):
``flaky_task(failures)`` logs ``flaky_attempt`` and raises ``ConnectionError``
on its first ``failures`` attempts (of 3); ``doomed_task()`` raises
``ConnectionError`` on both of its 2 attempts. Each
signal is logged as ``signal_received`` with its name and arguments. ``POST
/enqueue/<queue>/<job_type>`` enqueues a job with the request's JSON body as
payload.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pathlib
import signal
import sys
import threading
import time
import typing as t

import structlog
from flask import Flask
from flask import g
from flask import request
from flask_sqs_jobs import current_job
from flask_sqs_jobs import Job
from flask_sqs_jobs import Retry
from flask_sqs_jobs import signals
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.worker import _receive_health as worker_module

log = structlog.get_logger("flask_test_app")
_record_lock = threading.Lock()
#: How long ``block`` waits for its release file before giving up.
BLOCK_LIMIT_SECONDS = 60


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


def jobs_on_env_store(app: Flask) -> SQSJobs:
    """An extension on the store the environment names: a DynamoDB table
    (``TEST_APP_DYNAMODB_TABLE``) or a SQL URL (``TEST_APP_STORE_URL``)."""
    from flask_sqs_jobs.store import DynamoDBStore

    table = os.environ.get("TEST_APP_DYNAMODB_TABLE")
    if table:
        return SQSJobs(store=DynamoDBStore(table))
    app.config["SQS_JOBS_STORE_URL"] = os.environ["TEST_APP_STORE_URL"]
    return SQSJobs()


def record(line: dict[str, t.Any]) -> None:
    with _record_lock, open(os.environ["TEST_APP_RECORD_FILE"], "a") as file:
        file.write(json.dumps(line) + "\n")


def record_job(handler: str) -> None:
    """Record the running job, and mark the job's ``g`` as this job's."""
    record(
        {
            "kind": "job",
            "handler": handler,
            "message_id": current_job.message_id,
            "job_id": current_job.job_id,
            "request_id": current_job.correlation_fields.get("request_id"),
            "g_before": g.get("message_id"),
            "pid": os.getpid(),
        }
    )
    g.message_id = current_job.message_id


def describe(value: object) -> object:
    """A signal argument as JSON can show it."""
    if isinstance(value, Job):
        return {"job_type": value.job_type, "message_id": value.message_id}
    if isinstance(value, BaseException):
        return type(value).__name__
    return value


def create_app() -> Flask:
    if os.environ.get("TEST_APP_JSON_LOGS"):
        configure_logging()
        # `kill -USR1 <pid>` prints every thread's stack: how to diagnose a hang.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    backoff = os.environ.get("TEST_APP_MAX_RECEIVE_BACKOFF")
    if backoff:
        worker_module.MAX_RECEIVE_BACKOFF = float(backoff)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES=os.environ["TEST_APP_QUEUES"],
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
    )
    if os.environ.get("TEST_APP_STORE_URL"):
        app.config["SQS_JOBS_STORE_URL"] = os.environ["TEST_APP_STORE_URL"]
    jobs = SQSJobs(app)

    @jobs.handler("record")
    def record_handler(payload: dict[str, t.Any]) -> None:
        log.info("job_recorded", payload=payload)
        record_job("record")

    @jobs.handler("echo")
    def echo(payload: dict[str, t.Any]) -> dict[str, t.Any]:
        return {"echo": payload}

    @jobs.handler("block")
    def block(payload: dict[str, t.Any]) -> None:
        log.info("block_started", payload=payload)
        release = pathlib.Path(payload["release"])
        deadline = time.monotonic() + BLOCK_LIMIT_SECONDS
        while not release.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{release} was not created")
            time.sleep(0.02)
        record_job("block")

    @jobs.handler("fail")
    def fail(payload: dict[str, t.Any]) -> None:
        record_job("fail")
        raise RuntimeError("the job failed")

    @jobs.handler("fixable")
    def fixable(payload: dict[str, t.Any]) -> None:
        record_job("fixable")
        if not pathlib.Path(payload["fixed"]).exists():
            raise RuntimeError("not fixed yet")

    @jobs.handler("abortable")
    def abortable(payload: dict[str, t.Any]) -> None:
        log.info("abortable_started", payload=payload)
        release = pathlib.Path(payload["release"])
        deadline = time.monotonic() + BLOCK_LIMIT_SECONDS
        while not release.exists():
            if current_job.abort_requested.wait(0.02):
                log.info("abort_requested_seen")
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{release} was not created")
        record_job("abortable")

    jobs.handler("patient_abortable", max_runtime_seconds=600)(abortable)

    @jobs.task(retry=Retry(max_attempts=3, backoff_seconds=1))
    def flaky_task(failures: int) -> None:
        log.info(
            "flaky_attempt",
            attempt=current_job.attempt,
            max_attempts=current_job.max_attempts,
        )
        if t.cast(int, current_job.attempt) <= failures:
            raise ConnectionError("upstream unavailable")

    @jobs.task(retry=Retry(max_attempts=2, backoff_seconds=1))
    def doomed_task() -> None:
        raise ConnectionError("upstream gone for good")

    app.extensions["test_app_tasks"] = {"flaky": flaky_task, "doomed": doomed_task}

    @app.teardown_appcontext
    def record_teardown(exc: BaseException | None) -> None:
        record(
            {
                "kind": "teardown",
                "message_id": g.get("message_id"),
                "exception": None if exc is None else type(exc).__name__,
            }
        )

    @app.post("/enqueue/<queue>/<job_type>")
    def enqueue(queue: str, job_type: str) -> dict[str, str]:
        return {"message_id": jobs.enqueue(queue, job_type, request.get_json())}

    # Blinker keeps weak references: the app holds the receivers, so they live
    # exactly as long as the app.
    receivers = app.extensions["test_app_signal_receivers"] = []
    for signal_ in (
        signals.job_enqueued,
        signals.job_received,
        signals.job_started,
        signals.job_finished,
        signals.worker_started,
        signals.worker_stopped,
        signals.worker_error,
    ):
        receiver = _signal_logger(signal_.name, app)
        receivers.append(receiver)
        signal_.connect(receiver, sender=app)
    return app


def _signal_logger(name: str, app: Flask) -> t.Callable[..., None]:
    def receiver(sender: object, **kwargs: t.Any) -> None:
        log.info(
            "signal_received",
            signal=name,
            sender_is_app=sender is app,
            arguments={key: describe(value) for key, value in kwargs.items()},
        )

    return receiver
