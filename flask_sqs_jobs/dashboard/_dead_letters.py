"""Redrive or delete chosen dead letters, by MessageId, never losing one.

The ``all`` cases reuse :func:`~flask_sqs_jobs.engine.ops._inspection.redrive`;
a selection is found by receiving the dead-letter queue until every chosen
message was seen (or SQS has nothing more), acting on those and putting every
other message back at once.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

from ..engine.model import MAX_BATCH_ENTRIES
from ..engine.ops import counts
from ..engine.ops import make_visible
from ..engine.ops import receive_batch
from ..engine.ops import redrive
from ..engine.ops import resend_params

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from ..engine.sqs import SqsQueue

#: Receives of one action before it gives up looking for chosen messages.
_MAX_RECEIVES = 100


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """What an action did: messages redriven or deleted, not found, left after."""

    done: int
    not_found: int
    left: int

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def redrive_selected(
    dead_letters: SqsQueue, target: SqsQueue, message_ids: cabc.Collection[str]
) -> ActionResult:
    """Send each chosen dead letter to ``target``, then delete it from the DLQ.

    A send that fails raises before its message is deleted: the message and
    every one not yet handled are made visible again in the dead-letter queue.
    """

    def act(message: MessageTypeDef) -> None:
        target.send(resend_params(message, fifo=target.is_fifo))
        _delete(dead_letters, message)

    return _for_each_chosen(dead_letters, message_ids, act)


def delete_selected(
    dead_letters: SqsQueue, message_ids: cabc.Collection[str]
) -> ActionResult:
    """Delete each chosen dead letter (an offloaded payload's S3 object stays)."""
    return _for_each_chosen(
        dead_letters, message_ids, lambda message: _delete(dead_letters, message)
    )


def redrive_all(dead_letters: SqsQueue, target: SqsQueue) -> ActionResult:
    """Move every dead letter back to ``target`` (send, then delete)."""
    result = redrive(dead_letters, target)
    return ActionResult(done=result.moved, not_found=0, left=result.left)


def delete_all(dead_letters: SqsQueue) -> ActionResult:
    """Delete every dead letter there is now, each at most once per call."""
    seen: set[str] = set()
    deleted = 0
    for _ in range(_MAX_RECEIVES):
        fresh = _unseen(dead_letters, seen)
        if not fresh:
            break
        for message in fresh:
            _delete(dead_letters, message)
            deleted += 1
    return ActionResult(done=deleted, not_found=0, left=counts(dead_letters).total)


def _for_each_chosen(
    dead_letters: SqsQueue,
    message_ids: cabc.Collection[str],
    act: cabc.Callable[[MessageTypeDef], None],
) -> ActionResult:
    wanted = set(message_ids)
    seen: set[str] = set()
    others: list[MessageTypeDef] = []
    pending: list[MessageTypeDef] = []
    done = 0
    try:
        for _ in range(_MAX_RECEIVES):
            if not wanted - seen:
                break
            fresh = _unseen(dead_letters, seen)
            if not fresh:
                break
            for message in fresh:
                (pending if message["MessageId"] in wanted else others).append(message)
            while pending:
                act(pending[0])
                pending.pop(0)
                done += 1
    finally:
        make_visible(dead_letters, others + pending)
    return ActionResult(
        done=done,
        not_found=len(wanted - seen),
        left=counts(dead_letters).total,
    )


def _unseen(queue: SqsQueue, seen: set[str]) -> list[MessageTypeDef]:
    """Receive a batch; keep (and add to ``seen``) the messages not seen before."""
    fresh = [
        m for m in receive_batch(queue, MAX_BATCH_ENTRIES) if m["MessageId"] not in seen
    ]
    seen.update(m["MessageId"] for m in fresh)
    return fresh


def _delete(queue: SqsQueue, message: MessageTypeDef) -> None:
    queue.client.delete_message(
        QueueUrl=queue.url, ReceiptHandle=message["ReceiptHandle"]
    )
