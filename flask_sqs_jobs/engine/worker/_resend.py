"""What the worker sends again: a message's attributes, and its dead letter.

A deferred job and a dead letter are sent as new messages with the received
message's body and attributes; the received attributes are untrusted and in
ReceiveMessage's shape, so they are checked and reshaped here first.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog

from ..model import JSONObject
from ..model import loggable_text
from ..model import MAX_MESSAGE_ATTRIBUTES
from ..sqs import CORRELATION_FIELDS_ATTRIBUTE
from ..sqs import DEAD_LETTER_ATTRIBUTE
from ..sqs import dump_json
from ..sqs import format_utc
from ..sqs import POINTER_ATTRIBUTES
from ..sqs import string_attribute
from ._delivery import Delivery

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
