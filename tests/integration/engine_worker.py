"""A worker process for the integration tests, configured by environment variables.

- ``SQS_ENDPOINT``: the SQS endpoint URL.
- ``WORKER_QUEUES``: JSON, logical name -> definition as :meth:`QueueGroup.build`
  takes it (``name`` or ``url``, ``weight``, ``visibility_timeout``, ...).
- ``WORKER_RECORD_FILE``: where handlers append one JSON line per job they ran.
- ``WORKER_IDLE_WAIT`` (default 1) and ``WORKER_CONCURRENCY`` (default 1).
- ``WORKER_MAX_RECEIVE_BACKOFF``: shrinks the receive-failure backoff cap, so
  tests of persistent receive failures take seconds instead of minutes.

Handlers: ``record`` (record the job), ``block`` (log ``block_started``, wait
until the file named by the payload's ``release`` exists, then record),
``fail`` (record, then raise), ``flaky`` (record, then raise while the
receive count is at most the payload's ``failures``) and ``sleep`` (sleep the
payload's ``seconds``, then record).

Logs are JSON lines on stdout.
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

import boto3
import structlog
from botocore.config import Config
from flask_sqs_jobs.engine import current_job
from flask_sqs_jobs.engine import QueueGroup
from flask_sqs_jobs.engine import run_worker
from flask_sqs_jobs.engine.worker import _receive_health as worker_module

log = structlog.get_logger("engine_worker")
_record_lock = threading.Lock()


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


def _record(handler: str, payload: dict[str, t.Any], started: float) -> None:
    """Append what ran to the record file: one JSON line per call."""
    job = current_job
    line = json.dumps(
        {
            "handler": handler,
            "payload": payload,
            "queue": job.queue,
            "message_id": job.message_id,
            "receive_count": job.receive_count,
            "started": started,
            "finished": time.time(),
        }
    )
    with _record_lock, open(os.environ["WORKER_RECORD_FILE"], "a") as file:
        file.write(line + "\n")


def record(payload: dict[str, t.Any]) -> None:
    _record("record", payload, time.time())


def block(payload: dict[str, t.Any]) -> None:
    started = time.time()
    release = pathlib.Path(payload["release"])
    log.info("block_started", payload=payload)
    while not release.exists():
        time.sleep(0.02)
    _record("block", payload, started)


def fail(payload: dict[str, t.Any]) -> None:
    _record("fail", payload, time.time())
    raise RuntimeError(payload.get("error", "the job failed"))


def flaky(payload: dict[str, t.Any]) -> None:
    _record("flaky", payload, time.time())
    if (current_job.receive_count or 1) <= int(payload["failures"]):
        raise RuntimeError(f"failing on receive {current_job.receive_count}")


def sleep(payload: dict[str, t.Any]) -> None:
    started = time.time()
    time.sleep(float(payload["seconds"]))
    _record("sleep", payload, started)


HANDLERS = {
    "record": record,
    "block": block,
    "fail": fail,
    "flaky": flaky,
    "sleep": sleep,
}


def main() -> None:
    configure_logging()
    # `kill -USR1 <pid>` prints every thread's stack: how to diagnose a hang.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    backoff = os.environ.get("WORKER_MAX_RECEIVE_BACKOFF")
    if backoff:
        worker_module.MAX_RECEIVE_BACKOFF = float(backoff)
    client = boto3.client(
        "sqs",
        endpoint_url=os.environ["SQS_ENDPOINT"],
        region_name="us-east-1",
        # The worker retries receives itself; botocore's own retries would only
        # slow down the receive-failure tests.
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=2,
            read_timeout=40,
            max_pool_connections=32,
        ),
    )
    queues = QueueGroup.build(
        boto_client=client, queues=json.loads(os.environ["WORKER_QUEUES"])
    )
    run_worker(
        queues,
        HANDLERS,
        idle_wait_seconds=int(os.environ.get("WORKER_IDLE_WAIT", "1")),
        concurrency=int(os.environ.get("WORKER_CONCURRENCY", "1")),
    )


if __name__ == "__main__":
    main()
