"""Checks of the per-queue options, shared by SqsQueue and queue definitions."""

from __future__ import annotations

import json
import typing as t

import structlog

from ..model import is_finite_number
from ..model import MAX_VISIBILITY_TIMEOUT

log = structlog.get_logger(__name__)

#: The heartbeat's default: it extends a lease every third of its timeout.
DEFAULT_HEARTBEAT_FRACTION = 1 / 3
#: The range of ``heartbeat_fraction``: below, a short timeout would cost
#: many calls; above, one slow or retried call would let the message go.
MIN_HEARTBEAT_FRACTION = 0.1
MAX_HEARTBEAT_FRACTION = 0.5


def check_queue_options(
    *,
    max_runtime_seconds: object = 3600,
    visibility_timeout: object = None,
    retry_backoff_seconds: object = None,
    heartbeat_fraction: object = DEFAULT_HEARTBEAT_FRACTION,
) -> None:
    """Raise ``ValueError`` naming the first invalid per-queue option."""
    if (
        not is_finite_number(max_runtime_seconds)
        or t.cast(float, max_runtime_seconds) <= 0
    ):
        raise ValueError(
            "max_runtime_seconds must be a positive, finite number of seconds;"
            f" got {max_runtime_seconds!r}"
        )
    if visibility_timeout is not None and (
        isinstance(visibility_timeout, bool)
        or not isinstance(visibility_timeout, int)
        or not 0 <= visibility_timeout <= MAX_VISIBILITY_TIMEOUT
    ):
        raise ValueError(
            f"visibility_timeout must be an int 0..{MAX_VISIBILITY_TIMEOUT} (the SQS"
            " maximum), or None to use the queue's own setting;"
            f" got {visibility_timeout!r}"
        )
    if retry_backoff_seconds is not None and (
        not is_finite_number(retry_backoff_seconds)
        or t.cast(float, retry_backoff_seconds) <= 0
    ):
        raise ValueError(
            "retry_backoff_seconds must be a positive, finite number, or None (off);"
            f" got {retry_backoff_seconds!r}"
        )
    if not is_finite_number(heartbeat_fraction) or not (
        MIN_HEARTBEAT_FRACTION
        <= t.cast(float, heartbeat_fraction)
        <= MAX_HEARTBEAT_FRACTION
    ):
        raise ValueError(
            f"heartbeat_fraction must be a number {MIN_HEARTBEAT_FRACTION} to"
            f" {MAX_HEARTBEAT_FRACTION} (the share of the visibility timeout between"
            f" two extensions; default 1/3); got {heartbeat_fraction!r}"
        )


def parse_redrive_policy(raw: str, queue_name: str) -> tuple[str, int] | None:
    """``(dead-letter queue ARN, maxReceiveCount)`` from a RedrivePolicy attribute.

    An unreadable policy is logged (``redrive_policy_unreadable``) and read as
    none: the queue then works without a redrive, as SQS would.
    """
    try:
        policy = json.loads(raw)
        return str(policy["deadLetterTargetArn"]), int(policy["maxReceiveCount"])
    except (ValueError, KeyError, TypeError):
        log.warning("redrive_policy_unreadable", sqs_queue=queue_name, policy=raw)
        return None
