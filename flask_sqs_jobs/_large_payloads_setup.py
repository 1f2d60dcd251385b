"""``SQS_JOBS_LARGE_PAYLOADS``: its S3 client, and its bucket for development."""

from __future__ import annotations

import typing as t

import boto3
from botocore.config import Config as BotoConfig

from ._config import Config
from .engine import QueueGroup
from .engine.sqs import aws_error_code
from .engine.sqs import LargePayloads
from .engine.sqs import S3Client

#: Error codes of HeadBucket for a bucket that does not exist.
_NO_BUCKET_CODES = frozenset({"404", "NoSuchBucket", "NotFound"})


def make_s3_client(config: Config) -> S3Client:
    """An S3 client made the way boto3 makes any client.

    Region and credentials come from boto3's own configuration (the app's
    ``SQS_JOBS_REGION_NAME`` when set), the endpoint from ``AWS_ENDPOINT_URL_S3``
    and the like; ``SQS_JOBS_ENDPOINT_URL`` is SQS's alone.
    """
    return boto3.client(
        "s3",
        region_name=config.region_name,
        config=BotoConfig(retries={"mode": "standard", "max_attempts": 3}),
    )


def make_large_payloads(
    config: Config, s3_client: S3Client | None
) -> LargePayloads | None:
    """The app's :class:`LargePayloads`, or None when not configured."""
    if config.large_payloads is None:
        return None
    client = s3_client if s3_client is not None else make_s3_client(config)
    return LargePayloads(client, **config.large_payloads)


def create_bucket(large: LargePayloads) -> str:
    """Create the bucket unless it exists (never touching an existing one)."""
    client = large.s3_client
    try:
        client.head_bucket(Bucket=large.bucket)
    except Exception as exc:
        if aws_error_code(exc) not in _NO_BUCKET_CODES:
            raise
    else:
        return f"large payloads: bucket {large.bucket} exists, left unchanged"
    params: dict[str, t.Any] = {"Bucket": large.bucket}
    region = client.meta.region_name
    if region and region != "us-east-1":
        params["CreateBucketConfiguration"] = {"LocationConstraint": region}
    client.create_bucket(**params)
    return f"large payloads: bucket {large.bucket} created"


def create_bucket_lines(group: QueueGroup) -> list[str]:
    """``create-queues``' line about the large-payload bucket, if one is configured."""
    for _, queue in group.items():
        if queue.large_payloads is not None:
            return [create_bucket(queue.large_payloads)]
    return []
