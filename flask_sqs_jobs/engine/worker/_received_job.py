"""The job a delivery holds, as the runner hands it to middleware and handler."""

from __future__ import annotations

import time
import typing as t

import structlog

from ..model import Job
from ..model import RESERVED_LOG_KEYS
from ..model import trim_correlation_fields
from ..sqs import decode_attributes
from ..sqs import DecodedBody
from ..sqs import scheduled_for
from ..unique import received_unique
from ._delivery import Delivery
from ._delivery import received_runtime

log = structlog.get_logger(__name__)
job_log = structlog.get_logger("flask_sqs_jobs.job")


def job_of(delivery: Delivery, decoded: DecodedBody, job_id: str) -> Job:
    """The :class:`Job` a delivery holds, its correlation fields bound to
    the log context (trimmed of reserved keys, and said so)."""
    correlation_fields, trace_headers = decode_attributes(delivery.attributes)
    if correlation_fields:
        trimmed = trim_correlation_fields(correlation_fields, RESERVED_LOG_KEYS)
        structlog.contextvars.bind_contextvars(**trimmed.fields)
        if trimmed.changed:
            log.warning("correlation_fields_trimmed", **trimmed.counts())
    unique_key, unique_until = received_unique(decoded.unique)
    return Job(
        job_type=decoded.job_type,
        payload=decoded.payload,
        queue=delivery.queue_name,
        correlation_fields=correlation_fields,
        trace_headers=trace_headers,
        message_id=delivery.message_id,
        receive_count=delivery.receive_count,
        sent_at=delivery.sent_at,
        job_id=job_id,
        scheduled_for=scheduled_for(delivery.attributes, decoded.scheduled_for),
        max_runtime_seconds=received_runtime(decoded.max_runtime_seconds),
        unique_key=unique_key,
        unique_until=unique_until,
        tags=decoded.tags,
    )


def log_started(delivery: Delivery) -> None:
    """Log ``job_started``, with the FIFO group and how long the job waited."""
    fields: dict[str, t.Any] = {}
    if delivery.group_id is not None:
        fields["group_id"] = delivery.group_id
    if delivery.sent_at_ms is not None:
        fields["queue_wait_ms"] = max(0, int(time.time() * 1000) - delivery.sent_at_ms)
    job_log.info("job_started", **fields)
