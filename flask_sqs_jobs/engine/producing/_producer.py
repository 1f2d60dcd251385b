"""Validate a job before anything is sent, and turn it into SendMessage arguments."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import typing as t

import structlog

from ..model import call_hook
from ..model import check_job_id
from ..model import Job
from ..model import JSONObject
from ..model import MAX_DEFERRAL_SECONDS
from ..model import MAX_DELAY_SECONDS
from ..model import MAX_ID_LENGTH
from ..sqs import build_attributes
from ..sqs import check_message_attributes
from ..sqs import check_room
from ..sqs import dump_json
from ..sqs import encode_body
from ..sqs import MAX_JSON_DEPTH
from ..sqs import message_size
from ..sqs import MessageAttributes
from ..sqs import nested_deeper_than
from ..sqs import SqsQueue

job_log = structlog.get_logger("flask_sqs_jobs.job")

if t.TYPE_CHECKING:
    from ..model import Hooks

_OPTION_NAMES = frozenset(
    {
        "correlation_fields",
        "message_group_id",
        "message_deduplication_id",
        "delay_seconds",
        "message_attributes",
        "run_at",
    }
)


@dataclasses.dataclass(frozen=True)
class SendOptions:
    """The validated enqueue options of one job."""

    message_group_id: str | None = None
    message_deduplication_id: str | None = None
    #: DelaySeconds to send (0..900), or None.
    delay_seconds: int | None = None
    #: When set, the body carries ``run_at`` (a deferral past 15 minutes).
    run_at: dt.datetime | None = None
    message_attributes: MessageAttributes | None = None


def check_job_type(job_type: object) -> str:
    if not isinstance(job_type, str):
        raise TypeError(
            f"job_type must be a str naming a handler; got {type(job_type).__name__}"
        )
    if not job_type:
        raise ValueError("job_type must be a non-empty str naming a handler; got ''")
    return job_type


def check_payload(payload: object) -> JSONObject:
    """Return the payload (``{}`` for None) after checking it is a JSON object."""
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise TypeError(
            "payload must be a dict (a JSON object) or None; got"
            f" {type(payload).__name__}."
            " Wrap other values, e.g. {'items': [...]}."
        )
    check_json("payload", payload)
    return payload


def check_json(what: str, value: object) -> str:
    """Return ``value`` as JSON, or raise a TypeError/ValueError naming ``what``.

    ``value`` may nest objects and arrays :data:`MAX_JSON_DEPTH` levels deep
    (itself level 1), the bound the worker decodes bodies with.
    """
    too_deep = (
        f"{what} is nested too deeply: more than {MAX_JSON_DEPTH} levels of objects"
        " and arrays, counting itself; flatten it, or send an id to look it up by"
    )
    try:
        text = dump_json(value)
    except TypeError as exc:
        raise TypeError(
            f"{what} must be JSON-serialisable: {exc}. Pass ids and plain values"
            " (str, int, float, bool, None, list, dict) instead of objects."
        ) from None
    except ValueError as exc:
        raise ValueError(f"{what} must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValueError(too_deep) from None
    if nested_deeper_than(text, MAX_JSON_DEPTH):
        raise ValueError(too_deep)
    return text


def check_correlation_fields(fields: object) -> JSONObject:
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise TypeError(
            f"correlation_fields must be a dict or None; got {type(fields).__name__}"
        )
    check_json("correlation_fields", fields)
    return dict(fields)


def check_options(
    queue: SqsQueue, queue_name: str, options: dict[str, t.Any]
) -> SendOptions:
    """Validate the enqueue options of one job for ``queue``.

    :raises TypeError, ValueError: an option is wrong; the message names it and
        the fix.
    """
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise TypeError(
            f"unknown enqueue option(s) {sorted(unknown)}; valid options are"
            f" {sorted(_OPTION_NAMES)}"
        )
    group_id = _check_id("message_group_id", options.get("message_group_id"))
    dedup_id = _check_id(
        "message_deduplication_id", options.get("message_deduplication_id")
    )
    delay_seconds = options.get("delay_seconds")
    run_at = options.get("run_at")
    where = f"queue {queue_name!r} ({queue.name})"
    if queue.is_fifo:
        if group_id is None:
            raise ValueError(
                f"message_group_id is required on FIFO {where}; pass the id whose jobs"
                " must"
                " run in order (e.g. the user or order id)"
            )
        if delay_seconds is not None or run_at is not None:
            raise ValueError(
                f"FIFO {where} does not support per-message delays (delay_seconds /"
                " run_at);"
                " set DelaySeconds on the queue instead, or use a standard queue"
            )
        if dedup_id is None and queue.content_based_deduplication is False:
            raise ValueError(
                f"message_deduplication_id is required on FIFO {where}: it does not"
                " have"
                " ContentBasedDeduplication enabled"
            )
    elif dedup_id is not None:
        raise ValueError(
            f"message_deduplication_id only applies to FIFO queues; {where} is a"
            " standard queue"
        )
    delay, body_run_at = _resolve_delay(delay_seconds, run_at)
    return SendOptions(
        message_group_id=group_id,
        message_deduplication_id=dedup_id,
        delay_seconds=delay,
        run_at=body_run_at,
        message_attributes=check_message_attributes(options.get("message_attributes")),
    )


def _check_id(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None; got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_ID_LENGTH:
        raise ValueError(
            f"{name} must be 1..{MAX_ID_LENGTH} characters (the SQS limit); got"
            f" {len(value)}"
        )
    return value


def _resolve_delay(
    delay_seconds: object, run_at: object
) -> tuple[int | None, dt.datetime | None]:
    """Return (DelaySeconds, run_at for the body): long delays become deferrals."""
    if delay_seconds is not None and run_at is not None:
        raise ValueError("pass either delay_seconds or run_at, not both")
    if delay_seconds is not None:
        if isinstance(delay_seconds, bool) or not isinstance(delay_seconds, int):
            raise TypeError(
                "delay_seconds must be an int number of seconds; got"
                f" {type(delay_seconds).__name__}"
            )
        if not 0 <= delay_seconds <= MAX_DEFERRAL_SECONDS:
            raise ValueError(
                f"delay_seconds must be 0..{MAX_DEFERRAL_SECONDS} (365 days, the"
                f" longest deferral); got {delay_seconds}"
            )
        if delay_seconds <= MAX_DELAY_SECONDS:
            return delay_seconds, None
        run_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay_seconds)
    if run_at is None:
        return None, None
    if not isinstance(run_at, dt.datetime):
        raise TypeError(f"run_at must be a datetime; got {type(run_at).__name__}")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValueError(
            "run_at must be timezone-aware, e.g. datetime.now(UTC) + timedelta(hours=2)"
        )
    try:
        run_at.astimezone(dt.UTC)
    except OverflowError:
        # The body carries run_at in UTC; year 9999 at -14:00 has no UTC form.
        raise ValueError(f"run_at is out of range once in UTC; got {run_at}") from None
    remaining = (run_at - dt.datetime.now(dt.UTC)).total_seconds()
    if remaining > MAX_DEFERRAL_SECONDS:
        raise ValueError(
            "run_at may be at most 365 days ahead (the longest deferral); got"
            f" {run_at.isoformat()}, {remaining / 86400:,.0f} days ahead"
        )
    if remaining <= MAX_DELAY_SECONDS:
        return max(0, math.ceil(remaining)), None
    return MAX_DELAY_SECONDS, run_at


def build_send_params(
    queue: SqsQueue, queue_name: str, job: Job, options: SendOptions
) -> tuple[dict[str, t.Any], list[str]]:
    """Return the SendMessage arguments for ``job`` and the dropped attributes.

    :raises ValueError: the message would exceed the queue's MaximumMessageSize.
    """
    body = encode_body(job.job_type, job.payload, options.run_at, job.job_id)
    attributes, dropped = build_attributes(
        job.correlation_fields, job.trace_headers, options.message_attributes
    )
    size = message_size(body, attributes)
    limit = queue.max_message_size
    offloaded = check_room(queue.large_payloads, queue, body, attributes)
    if size > limit and not offloaded:
        raise ValueError(
            f"job {job.job_type!r} for queue {queue_name!r} is {size:,} bytes (body and"
            f" attributes); the queue accepts at most {limit:,} (MaximumMessageSize)."
            " Store large data elsewhere (S3, a database) and pass its key in the"
            " payload."
        )
    params: dict[str, t.Any] = {"MessageBody": body}
    if attributes:
        params["MessageAttributes"] = attributes
    if options.message_group_id is not None:
        params["MessageGroupId"] = options.message_group_id
    if options.message_deduplication_id is not None:
        params["MessageDeduplicationId"] = options.message_deduplication_id
    if options.delay_seconds is not None:
        params["DelaySeconds"] = options.delay_seconds
    return params, dropped


def stage_job(queue: SqsQueue, job: Job, options: SendOptions) -> dict[str, t.Any]:
    """Return the SendMessage arguments of a job at the end of its ``produce``
    chain (its job id checked again: middleware may have changed it).

    Propagation attributes over the 10-attribute limit are dropped with a
    ``propagation_attributes_dropped`` warning.
    """
    job.job_id = check_job_id(job.job_id)
    params, dropped = build_send_params(queue, job.queue, job, options)
    if dropped:
        job_log.warning(
            "propagation_attributes_dropped",
            queue=job.queue,
            job_type=job.job_type,
            dropped=dropped,
        )
    return params


def report_enqueued(hooks: Hooks, job: Job, message_id: str, **fields: object) -> None:
    """Log ``job_enqueued`` and call the ``job_enqueued`` hook (isolated)."""
    job_log.info(
        "job_enqueued",
        queue=job.queue,
        job_type=job.job_type,
        job_id=job.job_id,
        message_id=message_id,
        **fields,
    )
    call_hook("job_enqueued", hooks.job_enqueued, job, message_id)
