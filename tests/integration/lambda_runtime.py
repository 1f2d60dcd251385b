"""A stand-in for the Lambda runtime: one long-lived process invoking the handler.

Like the runtime's loop, it imports the function's module once (cold start),
then takes invocations one at a time: each line on stdin is
``{"event": ..., "remaining_seconds": N}``, each answer one JSON line on
stdout (the handler's response, or ``{"error": ...}`` when it raised). Logs
go to stderr. Set up by env vars: ``TEST_APP_ENDPOINT``, ``TEST_APP_QUEUE_URL``,
``TEST_APP_STORE_URL`` and ``TEST_APP_RUNS`` (a file the handler appends to).

The ``work`` task is idempotent; job ``n`` fails its first attempt when
``n % 7 == 0`` (an exception, retried after a 1 s backoff) and asks for an
immediate retry when ``n % 11 == 0`` (``RetryJob(delay_seconds=0)``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import typing as t

import structlog
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import Retry
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.aws_lambda import make_handler


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": os.environ["TEST_APP_QUEUE_URL"]}},
        SQS_JOBS_ENDPOINT_URL=os.environ["TEST_APP_ENDPOINT"],
        SQS_JOBS_REGION_NAME="us-east-1",
        SQS_JOBS_STORE_URL=os.environ["TEST_APP_STORE_URL"],
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = SQSJobs(app)
    jobs.store(app).create_tables()
    runs = os.environ["TEST_APP_RUNS"]

    @jobs.task(
        idempotent=True, retry=Retry(max_attempts=5, backoff_seconds=1, jitter=False)
    )
    def work(n: int) -> None:
        attempt = current_job.receive_count or 0
        with open(runs, "a") as file:
            file.write(json.dumps({"n": n, "attempt": attempt}) + "\n")
        if attempt == 1 and n % 7 == 0:
            raise RuntimeError(f"job {n} fails its first attempt")
        if attempt == 1 and n % 11 == 0:
            raise RetryJob(delay_seconds=0)

    return app


class Context:
    """Lambda's context: the invocation's deadline and ids."""

    function_name = "jobs-function"
    aws_request_id = "local"

    def __init__(self, remaining_seconds: float) -> None:
        self._deadline = time.monotonic() + remaining_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def main() -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(sys.stderr),
    )
    handler = make_handler(create_app, check_mapping=False)
    out = sys.stdout
    for line in sys.stdin:
        invocation: dict[str, t.Any] = json.loads(line)
        try:
            answer: object = handler(
                invocation["event"], Context(invocation["remaining_seconds"])
            )
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
