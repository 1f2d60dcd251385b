"""The checks a job passes before its produce chain runs: its values and options.

Every check raises ``TypeError`` or ``ValueError`` with a message that names
the argument and the fix; nothing is sent, written or run before they all
pass. :mod:`._prepare` calls them for each job of an enqueue call, and
:mod:`._staging` calls the value checks again when produce middleware may
have changed the job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import typing as t

from ..model import check_job_runtime
from ..model import JSONObject
from ..model import MAX_DEFERRAL_SECONDS
from ..model import MAX_DELAY_SECONDS
from ..model import MAX_ID_LENGTH
from ..sqs import check_message_attributes
from ..sqs import dump_json
from ..sqs import MAX_JSON_DEPTH
from ..sqs import MessageAttributes
from ..sqs import nested_deeper_than
from ..sqs import SqsQueue

#: The enqueue options a job may carry besides its type, payload and job id.
OPTION_NAMES = frozenset(
    {
        "correlation_fields",
        "message_group_id",
        "message_deduplication_id",
        "delay_seconds",
        "message_attributes",
        "run_at",
        "max_runtime_seconds",
        "expires_in",
        "expires_at",
        "tenant",
    }
)


@dataclasses.dataclass(frozen=True)
class SendOptions:
    """The checked enqueue options of one job, as SendMessage will carry them.

    Built by :func:`check_options` only; frozen, so a sink that needs other
    options (the eager sink drops delays) makes a copy with
    :func:`dataclasses.replace`.
    """

    message_group_id: str | None = None
    message_deduplication_id: str | None = None
    #: DelaySeconds to send (0..900), or None.
    delay_seconds: int | None = None
    #: When set, the body carries ``run_at`` (a deferral past 15 minutes).
    run_at: dt.datetime | None = None
    message_attributes: MessageAttributes | None = None
    #: The job's own runtime limit (the body's ``max_runtime_seconds``), or None.
    max_runtime_seconds: float | None = None
    #: When set, the body carries ``expires_at``: a worker receiving the job
    #: later deletes it unrun (outcome ``expired``).
    expires_at: dt.datetime | None = None


def check_job_type(job_type: object) -> str:
    """Return ``job_type`` if it is a non-empty str (a handler's name)."""
    if not isinstance(job_type, str):
        raise TypeError(
            f"job_type must be a str naming a handler; got {type(job_type).__name__}"
        )
    if not job_type:
        raise ValueError("job_type must be a non-empty str naming a handler; got ''")
    return job_type


def check_payload(payload: object) -> JSONObject:
    """Return the payload (``{}`` for None) after checking it is a JSON object."""
    return encode_payload(payload)[0]


def encode_payload(payload: object) -> tuple[JSONObject, str]:
    """Return the payload (``{}`` for None) and its JSON, checked to be a JSON object.

    The JSON is the body's ``payload`` exactly as :func:`~..sqs.encode_body`
    would write it, so staging reuses it instead of serialising the payload
    a second time (see :class:`~._prepare.PreparedJob`).
    """
    if payload is None:
        return {}, "{}"
    if not isinstance(payload, dict):
        raise TypeError(
            "payload must be a dict (a JSON object) or None; got"
            f" {type(payload).__name__}."
            " Wrap other values, e.g. {'items': [...]}."
        )
    return payload, check_json("payload", payload)


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
    """Return a copy of ``fields`` (``{}`` for None), checked to be a JSON object."""
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
    """Check the enqueue options of one job for ``queue``; ``run_at`` and long
    delays become a deferral (``run_at`` in the body, at most 900 s of
    DelaySeconds).

    :raises TypeError, ValueError: an option is wrong; the message names it and
        the fix.
    """
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise TypeError(
            f"unknown enqueue option(s) {sorted(unknown)}; valid options are"
            f" {sorted(OPTION_NAMES)}"
        )
    group_id = _check_id("message_group_id", options.get("message_group_id"))
    tenant = _check_id("tenant", options.get("tenant"))
    dedup_id = _check_id(
        "message_deduplication_id", options.get("message_deduplication_id")
    )
    delay_seconds = options.get("delay_seconds")
    run_at = options.get("run_at")
    where = f"queue {queue_name!r} ({queue.name})"
    if tenant is not None:
        group_id = _tenant_group(tenant, group_id, queue.is_fifo, where)
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
        max_runtime_seconds=check_job_runtime(options.get("max_runtime_seconds")),
        expires_at=check_expiry(options.get("expires_in"), options.get("expires_at")),
    )


def check_expiry(expires_in: object, expires_at: object) -> dt.datetime | None:
    """Return when the job expires (aware, UTC), or None: it never does."""
    if expires_in is not None and expires_at is not None:
        raise ValueError("pass either expires_in or expires_at, not both")
    if expires_in is not None:
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
            raise TypeError(
                "expires_in must be a number of seconds; got"
                f" {type(expires_in).__name__}"
            )
        if not math.isfinite(expires_in) or expires_in <= 0:
            raise ValueError(
                f"expires_in must be a positive, finite number of seconds; got"
                f" {expires_in!r}"
            )
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
    if expires_at is None:
        return None
    if not isinstance(expires_at, dt.datetime):
        raise TypeError(
            f"expires_at must be a datetime; got {type(expires_at).__name__}"
        )
    if expires_at.tzinfo is None or expires_at.utcoffset() is None:
        raise ValueError(
            "expires_at must be timezone-aware, e.g."
            " datetime.now(UTC) + timedelta(minutes=10)"
        )
    try:
        return expires_at.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(
            f"expires_at is out of range once in UTC; got {expires_at}"
        ) from None


def _tenant_group(tenant: str, group_id: str | None, fifo: bool, where: str) -> str:
    """The MessageGroupId of ``tenant=`` on a standard queue (SQS fair queues)."""
    if fifo:
        raise ValueError(
            f"tenant= applies to standard queues (SQS fair queues); FIFO {where}"
            " orders jobs by message_group_id: pass message_group_id instead"
        )
    if group_id is not None and group_id != tenant:
        raise ValueError(
            f"tenant= sets the MessageGroupId; pass tenant={tenant!r} or"
            f" message_group_id={group_id!r}, not both"
        )
    return tenant


def _check_id(name: str, value: object) -> str | None:
    """A MessageGroupId or MessageDeduplicationId: None, or 1-128 characters."""
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
