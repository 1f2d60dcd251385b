"""What operators do with a queue: count, find its dead letters, peek, redrive.

Functions taking an :class:`SqsQueue`, behind ``flask sqs-jobs stats`` and
``dlq``. Unlike the worker's cached reads, every call here asks SQS about the
queue as it is now.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import hashlib
import json
import typing as t

import structlog

from ..model import loads_shown
from ..model import MAX_BATCH_ENTRIES
from ..model import shown
from ..sqs import DEAD_LETTER_ATTRIBUTE
from ..sqs import decode_body
from ..sqs import offloaded_size
from ..sqs import SqsQueue
from ._letter_source import other_source

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = structlog.get_logger(__name__)

_COUNT_ATTRIBUTES: dict[str, t.Any] = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}
#: How long peeked or moved messages stay hidden while an operator command runs.
PEEK_VISIBILITY_SECONDS = 60
#: How long each ReceiveMessage of a peek or redrive waits for messages.
_RECEIVE_WAIT_SECONDS = 1
_SENDABLE_ATTRIBUTE_KEYS = ("DataType", "StringValue", "BinaryValue")


@dataclasses.dataclass(frozen=True)
class QueueCounts:
    """SQS's approximate message counts of a queue at one moment."""

    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class RedriveResult:
    """What a redrive did: the messages moved, and how many the DLQ holds after.

    ``other_sources``: the letters left because they record another source
    queue, counted by the name they record.
    """

    moved: int
    left: int
    other_sources: dict[str, int] = dataclasses.field(default_factory=dict)


def counts(queue: SqsQueue) -> QueueCounts:
    """Read the queue's visible, in-flight and delayed counts now (never cached)."""
    response = queue.client.get_queue_attributes(
        QueueUrl=queue.url, AttributeNames=list(_COUNT_ATTRIBUTES.values())
    )
    attributes = response.get("Attributes", {})
    values = {
        key: int(attributes.get(name, 0)) for key, name in _COUNT_ATTRIBUTES.items()
    }
    return QueueCounts(**values)


def dead_letter_queue(queue: SqsQueue) -> SqsQueue | None:
    """The queue's dead-letter queue from its RedrivePolicy as it is now, or None.

    The attributes are read again (which also refreshes the worker's cached
    copy) and the dead-letter queue's URL is looked up each call, so a policy
    changed since the worker started is seen.

    :raises QueueNotFoundError: the policy names a queue SQS does not have.
    """
    queue.read_attributes()
    policy = queue.redrive_policy()
    if policy is None:
        return None
    arn = policy[0].split(":")
    url = queue._get_queue_url(arn[-1], arn[-2] if len(arn) > 1 else None)
    return SqsQueue(url, boto_client=queue.client)


def peek(queue: SqsQueue, limit: int | None = None) -> list[MessageTypeDef]:
    """Receive up to ``limit`` distinct messages (all when None) without consuming them.

    Each is hidden for :data:`PEEK_VISIBILITY_SECONDS` while they are
    gathered, then made visible again; none is deleted.
    """
    received: dict[str, MessageTypeDef] = {}
    while limit is None or len(received) < limit:
        batch = MAX_BATCH_ENTRIES if limit is None else limit - len(received)
        fresh = [
            m for m in receive_batch(queue, batch) if m["MessageId"] not in received
        ]
        if not fresh:
            break
        received.update((m["MessageId"], m) for m in fresh)
    messages = list(received.values())
    make_visible(queue, messages)
    return messages


def make_visible(queue: SqsQueue, messages: cabc.Sequence[MessageTypeDef]) -> None:
    """Put received messages back on the queue at once, untouched."""
    for start in range(0, len(messages), MAX_BATCH_ENTRIES):
        chunk = messages[start : start + MAX_BATCH_ENTRIES]
        errors = queue.change_visibility_many([(m["ReceiptHandle"], 0) for m in chunk])
        for message, error in zip(chunk, errors, strict=True):
            if error is not None:
                log.warning(
                    "message_not_made_visible",
                    sqs_queue=queue.name,
                    message_id=message["MessageId"],
                    error=error[1],
                    visible_in_seconds=PEEK_VISIBILITY_SECONDS,
                )


def redrive(
    dead_letters: SqsQueue,
    target: SqsQueue,
    *,
    job_type: str | None = None,
    limit: int | None = None,
    queue_name: str | None = None,
    matches: cabc.Callable[[MessageTypeDef], bool] | None = None,
) -> RedriveResult:
    """Move messages from ``dead_letters`` to ``target``, each at most once per call.

    Each message is sent again with its body and attributes (less the
    ``dead_letter`` reason) and only then deleted, so a failure midway never
    loses a job. Messages not wanted (another ``job_type``, past ``limit``,
    or not ``matches(message)``) are put back at once. With ``queue_name``
    (the target's logical name), so are the letters that record another
    source queue (:mod:`~flask_sqs_jobs.engine._letter_source`), counted in
    ``other_sources``: from a dead-letter queue shared by several queues, only
    the target's own letters go to it.

    A job moved by this call that fails again and comes back to the
    dead-letter queue while the call runs (a new MessageId, the same body and
    attributes) is left there: the call stops once it receives only messages
    it has already seen or moved. So does a second dead letter identical to
    one moved (same body and attributes): the next call moves it.
    """
    moved = 0
    seen: set[str] = set()
    moved_jobs: set[str] = set()
    skipped: list[MessageTypeDef] = []
    elsewhere: dict[str, int] = {}
    try:
        while limit is None or moved < limit:
            fresh = [
                m
                for m in receive_batch(dead_letters, MAX_BATCH_ENTRIES)
                if m["MessageId"] not in seen
            ]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                source = (
                    None
                    if queue_name is None
                    else other_source(message, queue_name, target)
                )
                if source is not None:
                    elsewhere[source] = elsewhere.get(source, 0) + 1
                    skipped.append(message)
                    continue
                key = job_key(message)
                wanted = (
                    key not in moved_jobs
                    and (limit is None or moved < limit)
                    and (
                        job_type is None
                        or describe_dead_letter(message)["job_type"] == job_type
                    )
                    and (matches is None or matches(message))
                )
                if not wanted:
                    skipped.append(message)
                    continue
                target.send(resend_params(message, fifo=target.is_fifo))
                dead_letters.client.delete_message(
                    QueueUrl=dead_letters.url, ReceiptHandle=message["ReceiptHandle"]
                )
                moved_jobs.add(key)
                moved += 1
    finally:
        make_visible(dead_letters, skipped)
    return RedriveResult(
        moved=moved, left=counts(dead_letters).total, other_sources=elsewhere
    )


def job_key(message: cabc.Mapping[str, t.Any]) -> str:
    """A digest of what a redrive sends again: the body and attributes but the reason.

    A job sent back and dead-lettered again keeps both, under a new MessageId.
    """
    attributes = {
        name: {k: str(v) for k, v in value.items() if k in _SENDABLE_ATTRIBUTE_KEYS}
        for name, value in (message.get("MessageAttributes") or {}).items()
        if name != DEAD_LETTER_ATTRIBUTE
    }
    text = json.dumps([message.get("Body", ""), attributes], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def resend_params(message: cabc.Mapping[str, t.Any], *, fifo: bool) -> dict[str, t.Any]:
    """SendMessage arguments (without QueueUrl) that send a dead letter again."""
    params: dict[str, t.Any] = {"MessageBody": message["Body"]}
    attributes = {
        name: {k: v for k, v in value.items() if k in _SENDABLE_ATTRIBUTE_KEYS}
        for name, value in (message.get("MessageAttributes") or {}).items()
        if name != DEAD_LETTER_ATTRIBUTE
    }
    if attributes:
        params["MessageAttributes"] = attributes
    if fifo:
        system = message.get("Attributes") or {}
        params["MessageGroupId"] = system.get("MessageGroupId", "redrive")
        params["MessageDeduplicationId"] = f"redrive-{message['MessageId']}"[:128]
    return params


def describe_dead_letter(message: cabc.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What an operator needs to know about one dead letter.

    A payload or reason nested too deep to show is ``{"unreadable": why}``
    (:mod:`flask_sqs_jobs.engine.model.untrusted`).
    """
    body = message.get("Body", "")
    decoded = decode_body(body)
    attributes = message.get("MessageAttributes") or {}
    reason_text = (attributes.get(DEAD_LETTER_ATTRIBUTE) or {}).get("StringValue")
    try:
        reason = (
            loads_shown(reason_text, "the dead_letter attribute")
            if reason_text
            else None
        )
    except ValueError:
        reason = {"error": reason_text}
    system = message.get("Attributes") or {}
    return {
        "message_id": message.get("MessageId"),
        "job_type": None if isinstance(decoded, str) else decoded.job_type,
        "payload": (
            None if isinstance(decoded, str) else shown(decoded.payload, "the payload")
        ),
        "body": body if isinstance(decoded, str) else None,
        "dead_letter": reason,
        "offloaded_bytes": offloaded_size(message),
        "sent_timestamp": system.get("SentTimestamp"),
        "receive_count": system.get("ApproximateReceiveCount"),
    }


def receive_batch(queue: SqsQueue, max_messages: int) -> list[MessageTypeDef]:
    return queue.client.receive_message(
        QueueUrl=queue.url,
        MaxNumberOfMessages=max(1, min(MAX_BATCH_ENTRIES, max_messages)),
        VisibilityTimeout=PEEK_VISIBILITY_SECONDS,
        WaitTimeSeconds=_RECEIVE_WAIT_SECONDS,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
