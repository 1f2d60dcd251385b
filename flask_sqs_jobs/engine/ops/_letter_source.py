"""Which queue a dead letter came from, as the letter itself records it.

A dead-letter queue may serve several source queues, so a redrive must not
send every letter to the queue it was asked for. A letter records its source
in one of two places, the first one present wins:

- the system attribute ``DeadLetterQueueSourceArn``, which SQS sets when its
  redrive policy moves a message (not every local server sets it): the
  physical queue, by its ARN;
- the ``source_queue`` of the worker's ``dead_letter`` attribute: the logical
  name (the key in ``SQS_JOBS_QUEUES``) of the queue whose worker moved it.

A letter with neither (sent to the dead-letter queue by hand, or moved by a
server that records nothing) has no recorded source.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import json
import typing as t

from ..sqs import DEAD_LETTER_ATTRIBUTE

if t.TYPE_CHECKING:
    from ..sqs import SqsQueue

SOURCE_ARN_ATTRIBUTE = "DeadLetterQueueSourceArn"


@dataclasses.dataclass(frozen=True)
class RecordedSource:
    """A dead letter's source queue, as recorded."""

    #: A physical queue name (from the ARN) or a logical one (from the reason).
    name: str
    #: Whether ``name`` comes from ``DeadLetterQueueSourceArn`` (physical).
    from_arn: bool

    def is_queue(self, queue_name: str, queue: SqsQueue) -> bool:
        """Whether this names ``queue``, by its logical ``queue_name`` or its own."""
        if self.from_arn:
            return self.name == queue.name
        return self.name in (queue_name, queue.name)


def recorded_source(message: cabc.Mapping[str, t.Any]) -> RecordedSource | None:
    """The source queue ``message`` records, or None when it records none."""
    system = message.get("Attributes") or {}
    arn = system.get(SOURCE_ARN_ATTRIBUTE)
    if isinstance(arn, str) and arn.strip():
        return RecordedSource(arn.rsplit(":", 1)[-1], from_arn=True)
    attribute = (message.get("MessageAttributes") or {}).get(DEAD_LETTER_ATTRIBUTE)
    text = attribute.get("StringValue") if isinstance(attribute, dict) else None
    if not isinstance(text, str):
        return None
    try:
        # A reason is flat; one too deep to decode names no source.
        reason = json.loads(text)
    except (ValueError, RecursionError):
        return None
    name = reason.get("source_queue") if isinstance(reason, dict) else None
    if isinstance(name, str) and name:
        return RecordedSource(name, from_arn=False)
    return None


def other_source(
    message: cabc.Mapping[str, t.Any], queue_name: str, queue: SqsQueue
) -> str | None:
    """The queue ``message`` records as its source when that is not this queue.

    None when it records this queue (``queue_name``, or ``queue`` by its
    physical name) or no queue at all: such a letter may go back to this one.
    """
    source = recorded_source(message)
    if source is None or source.is_queue(queue_name, queue):
        return None
    return source.name
