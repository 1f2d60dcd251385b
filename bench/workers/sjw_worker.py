"""sqs-job-worker draining the benchmark queue (run in .bench/venv-sqs-job-worker)."""

from __future__ import annotations

import boto3
from _common import config
from _common import configure_logging
from _common import Counters
from botocore.config import Config
from sqs_job_worker import JobWorker
from sqs_job_worker import QueueGroup


def main() -> None:
    cfg = config()
    configure_logging(cfg)
    sqs = boto3.client(
        "sqs", endpoint_url=cfg["endpoint"], config=Config(max_pool_connections=32)
    )
    counters = Counters(cfg["counters"], cfg["sleep_ms"], cfg["jobs"])
    queues = QueueGroup.build(boto_client=sqs, queues={"default": {"url": cfg["url"]}})
    worker = JobWorker(
        queues,
        {"noop": counters.run},
        should_stop=counters.all_done.is_set,
        idle_wait_seconds=1,
    )
    worker.run()


if __name__ == "__main__":
    main()
