"""The parts an app's configuration makes: its SQS and S3 clients, its job store,
and the options idempotent handlers need from that store.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import NoRegionError

from ..engine import QueueGroup
from ..engine.model import check_idempotency
from ..engine.model import DEFAULT_IDEMPOTENCY_TTL_SECONDS
from ..engine.model import JOB_TYPE_SCOPE
from ..engine.model import JobHandler
from ..engine.model import KeyFunc
from ..engine.model import MAX_WAIT_SECONDS
from ..engine.sqs import aws_error_code
from ..engine.sqs import LargePayloads
from ..engine.sqs import S3Client
from ..store.model import JobStore
from ._settings import AWSSetupError
from ._settings import Config

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


def make_store(config: Config) -> JobStore | None:
    """The :class:`SQLAlchemyStore` of ``SQS_JOBS_STORE_URL``, or None when unset.

    :raises ValueError: the URL is not one SQLAlchemy can use; the message
        names the key.
    :raises ImportError: the ``sqlalchemy`` extra (or the URL's driver) is
        not installed; the message names what to install.
    """
    if config.store_url is None:
        return None
    try:
        from ..store.sql import SQLAlchemyStore
    except ImportError as exc:
        raise ImportError(f"SQS_JOBS_STORE_URL is set, but {exc}") from None
    try:
        return SQLAlchemyStore(config.store_url)
    except ValueError as exc:
        raise ValueError(f"SQS_JOBS_STORE_URL: {exc}") from None
    except ImportError as exc:
        raise ImportError(
            f"SQS_JOBS_STORE_URL names a database whose driver is not installed"
            f' ({exc}); for PostgreSQL: pip install "flask-sqs-jobs[postgres]"'
        ) from None


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


IDEMPOTENT_NEEDS_A_STORE = (
    "idempotent handlers ({names}) need a job store for their keys: set"
    " SQS_JOBS_STORE_URL (e.g. 'sqlite:///instance/jobs.db') or pass"
    " SQSJobs(store=...), then run `flask sqs-jobs store init`"
)

LIMITS_NEED_A_STORE = (
    "handlers with limits ({names}) need a job store, which holds their token"
    " buckets and permits for every worker process: set SQS_JOBS_STORE_URL (e.g."
    " 'sqlite:///instance/jobs.db') or pass SQSJobs(store=...), then run"
    " `flask sqs-jobs store init`"
)


def limits_store_error(
    handlers: cabc.Mapping[str, JobHandler], store: object, eager: bool
) -> str | None:
    """The error when handlers declare limits and no store can hold them."""
    if store is not None or eager:
        return None
    limited = sorted(name for name, handler in handlers.items() if handler.limits)
    if not limited:
        return None
    return LIMITS_NEED_A_STORE.format(names=", ".join(map(repr, limited)))


def handler_options(
    job_type: str,
    idempotent: object,
    idempotency_key: object,
    idempotency_ttl_seconds: object,
    idempotency_scope: object = JOB_TYPE_SCOPE,
) -> dict[str, t.Any]:
    """Check ``@jobs.handler``'s idempotency arguments; return JobHandler's."""
    if not isinstance(idempotent, bool):
        raise TypeError(
            f"@jobs.handler({job_type!r}): idempotent must be True or False;"
            f" got {idempotent!r}"
        )
    try:
        check_idempotency(idempotency_key, idempotency_ttl_seconds, idempotency_scope)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"@jobs.handler({job_type!r}): {exc}") from None
    plain = not idempotent and idempotency_key is None
    for name, value, default in (
        (
            "idempotency_ttl_seconds",
            idempotency_ttl_seconds,
            DEFAULT_IDEMPOTENCY_TTL_SECONDS,
        ),
        ("idempotency_scope", idempotency_scope, JOB_TYPE_SCOPE),
    ):
        if plain and value != default:
            raise ValueError(
                f"@jobs.handler({job_type!r}): {name} only applies to idempotent"
                " handlers; add idempotent=True or idempotency_key=..."
            )
    return {
        "idempotent": idempotent or idempotency_key is not None,
        "idempotency_key": t.cast("KeyFunc | None", idempotency_key),
        "idempotency_ttl_seconds": idempotency_ttl_seconds,
        "idempotency_scope": idempotency_scope,
    }


def idempotent_job_types(handlers: cabc.Mapping[str, JobHandler]) -> list[str]:
    return sorted(name for name, handler in handlers.items() if handler.idempotent)


def missing_store_error(handlers: cabc.Mapping[str, JobHandler]) -> str | None:
    """The one-line error when idempotent or limited handlers have no store."""
    names = idempotent_job_types(handlers)
    if names:
        return IDEMPOTENT_NEEDS_A_STORE.format(names=", ".join(map(repr, names)))
    return limits_store_error(handlers, None, eager=False)


def worker_store_options(
    store: JobStore | None, handlers: cabc.Mapping[str, JobHandler]
) -> dict[str, t.Any]:
    """``JobWorker``'s ``idempotency_keys`` and ``session_factory`` from a store."""
    if store is None:
        error = missing_store_error(handlers)
        if error is not None:
            raise ValueError(error)
        return {}
    options: dict[str, t.Any] = {"session_factory": getattr(store, "session", None)}
    if idempotent_job_types(handlers):
        options["idempotency_keys"] = store.idempotency_keys()
    if any(handler.limits for handler in handlers.values()):
        options["limit_store"] = store.limits()
    return options


def eager_store_options(
    store: JobStore | None, handlers: cabc.Mapping[str, JobHandler]
) -> dict[str, t.Any]:
    """As :func:`worker_store_options`; without a store, idempotency is off.

    Eager mode runs every job at once: it applies no limits.
    """
    if store is None:
        return {}
    options = worker_store_options(store, handlers)
    options.pop("limit_store", None)
    return options
