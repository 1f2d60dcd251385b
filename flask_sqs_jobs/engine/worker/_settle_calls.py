"""The SQS calls a settler makes beyond a delete, and what they need.

How long a failed job waits and setting a message's visibility within SQS's
12 hours; what a deferral or a dead letter sends again: the received
message's body and attributes, which are untrusted and in ReceiveMessage's
shape, so they are checked and reshaped here first.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import time
import typing as t

import structlog

from ..model import JSONObject
from ..model import loggable_text
from ..model import MAX_MESSAGE_ATTRIBUTES
from ..model import MAX_VISIBILITY_TIMEOUT
from ..model import Retry
from ..model import RetryJob
from ..sqs import CallError
from ..sqs import CORRELATION_FIELDS_ATTRIBUTE
from ..sqs import DEAD_LETTER_ATTRIBUTE
from ..sqs import dump_json
from ..sqs import format_utc
from ..sqs import POINTER_ATTRIBUTES
from ..sqs import string_attribute
from ._delivery import Delivery
from ._lease import VISIBILITY_WINDOW_SECONDS
from ._lease import WINDOW_MARGIN_SECONDS

log = structlog.get_logger(__name__)

#: Attributes that only carry context from the producer (correlation fields
#: and trace headers), in the order they are kept when some must go: the last
#: one present is dropped first.
PROPAGATION_ATTRIBUTES = (
    CORRELATION_FIELDS_ATTRIBUTE,
    "traceparent",
    "tracestate",
    "sentry-trace",
    "baggage",
    "newrelic",
)


def copy_attributes(attributes: object) -> dict[str, JSONObject]:
    """Return received message attributes in the shape SendMessage accepts.

    An attribute without a type or a value (a server's oddity) is left out.
    """
    copied: dict[str, JSONObject] = {}
    if not isinstance(attributes, dict):
        return copied
    for name, attribute in attributes.items():
        if not isinstance(attribute, dict) or "DataType" not in attribute:
            continue
        kept = {
            k: attribute[k]
            for k in ("DataType", "StringValue", "BinaryValue")
            if k in attribute
        }
        if len(kept) > 1:
            copied[name] = kept
    return copied


def dead_letter_params(
    delivery: Delivery, exception: BaseException | None
) -> dict[str, t.Any]:
    """SendMessage arguments that move ``delivery`` to its dead-letter queue.

    The original body and attributes, plus the ``dead_letter`` attribute with
    the reason (SPEC's JSON); attributes go, propagation first, to make room
    within SQS's ten. A FIFO message keeps its group and is deduplicated by
    its MessageId.
    """
    reason = {
        "error_type": type(exception).__name__ if exception is not None else None,
        "error": str(exception)[:1000] if exception is not None else None,
        "failed_at": format_utc(dt.datetime.now(dt.UTC)),
        "source_queue": delivery.queue_name,
        "receive_count": delivery.receive_count,
    }
    attributes = copy_attributes(delivery.attributes)
    attributes.pop(DEAD_LETTER_ATTRIBUTE, None)
    _make_room(attributes)
    attributes[DEAD_LETTER_ATTRIBUTE] = string_attribute(dump_json(reason))
    params: dict[str, t.Any] = {
        "MessageBody": delivery.body,
        "MessageAttributes": attributes,
    }
    if delivery.queue.is_fifo:
        params["MessageGroupId"] = delivery.group_id or "dead-letter"
        params["MessageDeduplicationId"] = delivery.message_id[:128]
    return params


def _last_droppable(attributes: dict[str, JSONObject]) -> str:
    """The last attribute that may go; a large payload's size marker never does."""
    return next(name for name in reversed(attributes) if name not in POINTER_ATTRIBUTES)


def _make_room(attributes: dict[str, JSONObject]) -> None:
    """Drop attributes until the ``dead_letter`` one fits, saying which went.

    Propagation attributes go first (trace headers, then
    ``correlation_fields``), so the job's own attributes reach the dead-letter
    queue; only when every attribute is the job's own does the last one go.
    """
    dropped: list[str] = []
    propagation = [name for name in PROPAGATION_ATTRIBUTES if name in attributes]
    while len(attributes) >= MAX_MESSAGE_ATTRIBUTES:
        name = propagation.pop() if propagation else _last_droppable(attributes)
        del attributes[name]
        dropped.append(name)
    if not dropped:
        return
    job_attributes = [name for name in dropped if name not in PROPAGATION_ATTRIBUTES]
    log.warning(
        "dead_letter_attributes_dropped",
        dropped=[loggable_text(name, 256) for name in dropped],
        job_attributes_dropped=bool(job_attributes),
    )


def retry_delay(
    delivery: Delivery, exception: BaseException | None, policy: Retry | None = None
) -> int | None:
    """Seconds a failed job waits before its next attempt; None: SQS's own timeout.

    ``RetryJob`` names its own delay; otherwise the handler's retry policy
    decides, or else the queue's ``retry_backoff_seconds``: a random whole
    number of seconds in ``[d, 2d]``, ``d = base * 2 ** (receive_count - 1)``.
    """
    if isinstance(exception, RetryJob):
        return exception.delay_seconds
    if policy is not None:
        return policy.delay(delivery.receive_count)
    base = delivery.queue.retry_backoff_seconds
    if base is None:
        return None
    # Both bounded first, so that no receive count or base can overflow.
    exponent = min(max(0, delivery.receive_count - 1), 64)
    delay = min(
        MAX_VISIBILITY_TIMEOUT, min(base, MAX_VISIBILITY_TIMEOUT) * 2.0**exponent
    )
    # Whole seconds within [d, 2d], as SQS takes only ints.
    low = math.ceil(delay)
    high = max(low, math.floor(min(MAX_VISIBILITY_TIMEOUT, 2 * delay)))
    return random.randint(low, high)


def change_visibility(
    delivery: Delivery, seconds: int, *, visible_now: bool = False
) -> tuple[int, CallError]:
    """Set the visibility, already capped to the receive's 12 hours.

    Returns the seconds set and the error. A cap of 0 means the window is
    spent: SQS would refuse more, and 0 would make the message visible at
    once, so nothing is sent. Only a caller asking for 0 gets 0. A server that
    counts the 12 hours from the send instead (moto does) refuses a message
    that waited long in the queue: the change is then sent again within that
    stricter window, rather than leaving the message soon visible.
    """
    if seconds == 0 and not visible_now:
        return 0, None
    error = delivery.queue.change_visibility(delivery.receipt_handle, seconds)
    if error is None or error[0] != "InvalidParameterValue" or seconds == 0:
        return seconds, error
    sent_at = delivery.sent_at
    if sent_at is None:
        return seconds, error
    left = math.floor(
        sent_at + VISIBILITY_WINDOW_SECONDS - WINDOW_MARGIN_SECONDS - time.time()
    )
    if not 0 < left < seconds:
        return seconds, error
    return left, delivery.queue.change_visibility(delivery.receipt_handle, left)


def is_last_receive(delivery: Delivery) -> bool:
    """Whether SQS moves the message to its dead-letter queue if it comes back."""
    policy = delivery.queue.redrive_policy()
    return policy is not None and delivery.receive_count >= policy[1]


def describe(error: CallError) -> str | None:
    """A failed call's error for a log line: ``"Code: message"``."""
    return None if error is None else f"{error[0]}: {error[1]}"
