"""The SQS client an app's extension creates from its configuration."""

from __future__ import annotations

import typing as t

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import NoRegionError

from ._config import AWSSetupError
from ._config import Config
from .engine.model import MAX_WAIT_SECONDS

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Extra pooled connections beyond one per job thread: long polls, heartbeat,
#: deletes and visibility changes run beside the jobs.
SPARE_CONNECTIONS = 8
#: Seconds a long poll's answer may take beyond its wait (latency, a slow server).
READ_TIMEOUT_MARGIN = 15


def make_sqs_client(config: Config) -> SQSClient:
    """Create the SQS client: timeouts that fit long polls, and a connection pool
    large enough for the worker's threads.

    The read timeout covers the longest long poll SQS allows, whatever
    ``SQS_JOBS_IDLE_WAIT_SECONDS`` says: one client serves every worker of the
    app, and ``create_worker(idle_wait_seconds=...)`` (``--idle-wait``) may
    wait longer than the config. Other calls answer at once, so the longer
    timeout only matters for a connection that hangs.
    """
    boto_config = BotoConfig(
        connect_timeout=5,
        read_timeout=MAX_WAIT_SECONDS + READ_TIMEOUT_MARGIN,
        retries={"mode": "standard", "max_attempts": 3},
        max_pool_connections=64 + SPARE_CONNECTIONS,
    )
    try:
        return boto3.client(
            "sqs",
            endpoint_url=config.endpoint_url,
            region_name=config.region_name,
            config=boto_config,
        )
    except NoRegionError:
        raise AWSSetupError(
            "no AWS region is configured for SQS: set SQS_JOBS_REGION_NAME (or"
            " FLASK_SQS_JOBS_REGION_NAME, or AWS_DEFAULT_REGION)"
        ) from None
