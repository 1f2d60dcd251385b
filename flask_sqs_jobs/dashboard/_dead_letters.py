"""Redrive or delete chosen dead letters, by MessageId, never losing one.

The ``all`` cases reuse :func:`~flask_sqs_jobs.engine.ops._inspection.redrive`;
a selection is found by receiving the dead-letter queue until every chosen
message was seen (or SQS has nothing more), acting on those and putting every
other message back at once. A redrive leaves in the dead-letter queue each
letter that records another source queue than the one redriven to
(:mod:`~flask_sqs_jobs.engine._letter_source`).
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

from ..engine.model import MAX_BATCH_ENTRIES
from ..engine.ops import counts
from ..engine.ops import make_visible
from ..engine.ops import other_source
from ..engine.ops import receive_batch
from ..engine.ops import redrive
from ..engine.ops import resend_params

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from ..engine.ops import RedriveResult
    from ..engine.sqs import SqsQueue
    from ._letter_filter import LetterFilter

#: Receives of one action before it gives up looking for chosen messages.
_MAX_RECEIVES = 100


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """What an action did: messages redriven or deleted, not found, left after.

    ``other_queues``: the letters a redrive left because they record another
    source queue, by the name they record.
    """

    done: int
    not_found: int
    left: int
    other_queues: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, t.Any]:
        """The counts; ``other_queues`` only when a letter was left for one."""
        found = dataclasses.asdict(self)
        if not self.other_queues:
            del found["other_queues"]
        return found


def redrive_selected(
    dead_letters: SqsQueue,
    target: SqsQueue,
    queue_name: str,
    message_ids: cabc.Collection[str],
) -> ActionResult:
    """Send each chosen dead letter to ``target`` (``queue_name``), then delete it.

    A send that fails raises before its message is deleted: the message and
    every one not yet handled are made visible again in the dead-letter queue.
    A letter that records another source queue is left where it is.
    """
    elsewhere: dict[str, int] = {}

    def act(message: MessageTypeDef) -> bool:
        source = other_source(message, queue_name, target)
        if source is not None:
            elsewhere[source] = elsewhere.get(source, 0) + 1
            return False
        target.send(resend_params(message, fifo=target.is_fifo))
        _delete(dead_letters, message)
        return True

    result = _for_each_chosen(dead_letters, message_ids, act)
    return dataclasses.replace(result, other_queues=elsewhere)


def delete_selected(
    dead_letters: SqsQueue, message_ids: cabc.Collection[str]
) -> ActionResult:
    """Delete each chosen dead letter (an offloaded payload's S3 object stays)."""

    def act(message: MessageTypeDef) -> bool:
        _delete(dead_letters, message)
        return True

    return _for_each_chosen(dead_letters, message_ids, act)


def redrive_all(
    dead_letters: SqsQueue, target: SqsQueue, queue_name: str
) -> ActionResult:
    """Move every dead letter of ``target`` (``queue_name``) back to it.

    Each is sent, then deleted; one that records another source queue stays.
    """
    return _moved(redrive(dead_letters, target, queue_name=queue_name))


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


def count_matching(dead_letters: SqsQueue, chosen: LetterFilter) -> tuple[int, int]:
    """How many dead letters match ``chosen``, and how many were read: every
    letter is received once and made visible again at once."""
    matching = read = 0
    for received, fresh in _receive_all(dead_letters):
        try:
            matching += sum(1 for message in fresh if chosen.matches(message))
            read += len(fresh)
        finally:
            make_visible(dead_letters, received)
    return matching, read


def redrive_matching(
    dead_letters: SqsQueue, target: SqsQueue, queue_name: str, chosen: LetterFilter
) -> ActionResult:
    """Move every dead letter that matches ``chosen`` back to ``target``, as
    :func:`redrive_all` moves them; the others are put back at once."""
    return _moved(
        redrive(dead_letters, target, queue_name=queue_name, matches=chosen.matches)
    )


def delete_matching(dead_letters: SqsQueue, chosen: LetterFilter) -> ActionResult:
    """Delete every dead letter that matches ``chosen``, each at most once per call."""
    deleted = 0
    for received, fresh in _receive_all(dead_letters):
        chosen_now = [m for m in fresh if chosen.matches(m)]
        try:
            for message in chosen_now:
                _delete(dead_letters, message)
                deleted += 1
        finally:
            make_visible(dead_letters, [m for m in received if m not in chosen_now])
    return ActionResult(done=deleted, not_found=0, left=counts(dead_letters).total)


def _receive_all(
    dead_letters: SqsQueue,
) -> cabc.Iterator[tuple[list[MessageTypeDef], list[MessageTypeDef]]]:
    """Each batch received and the messages in it not seen before, until a batch
    holds none; the caller puts back what it does not delete (seen ones too)."""
    seen: set[str] = set()
    for _ in range(_MAX_RECEIVES):
        received = receive_batch(dead_letters, MAX_BATCH_ENTRIES)
        fresh = [m for m in received if m["MessageId"] not in seen]
        seen.update(m["MessageId"] for m in fresh)
        yield received, fresh
        if not fresh:
            return


def _for_each_chosen(
    dead_letters: SqsQueue,
    message_ids: cabc.Collection[str],
    act: cabc.Callable[[MessageTypeDef], bool],
) -> ActionResult:
    """Call ``act`` on each chosen message; one it returns False for goes back."""
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
                if act(pending[0]):
                    done += 1
                else:
                    others.append(pending[0])
                pending.pop(0)
    finally:
        make_visible(dead_letters, others + pending)
    return ActionResult(
        done=done,
        not_found=len(wanted - seen),
        left=counts(dead_letters).total,
    )


def _moved(result: RedriveResult) -> ActionResult:
    return ActionResult(
        done=result.moved,
        not_found=0,
        left=result.left,
        other_queues=result.other_sources,
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
