"""Sending through S3: offload what must be, and clean up what was not sent."""

from __future__ import annotations

import collections.abc as cabc
import typing as t
import uuid

import structlog

from ..model import MAX_MESSAGE_ATTRIBUTES
from ._errors import aws_error_code
from ._fresh_copies import ReuploadFailed
from ._fresh_copies import send_fresh_copies
from ._large_payloads import LargePayloads
from ._large_payloads import Pointer
from ._large_payloads import SIZE_ATTRIBUTE
from ._large_payloads import size_attribute
from ._queue import SqsQueue
from ._wire import JOB_TYPE_ATTRIBUTE
from ._wire import message_size

log = structlog.get_logger(__name__)


def check_room(
    large: LargePayloads | None,
    queue: SqsQueue,
    body: str,
    attributes: dict[str, t.Any],
) -> bool:
    """Whether a message goes through S3; ValueError if it cannot fit even so."""
    if large is None:
        return False
    if not large.should_offload(message_size(body, attributes), queue.max_message_size):
        return False
    stored = len(body.encode())
    if stored > large.max_bytes:
        raise ValueError(
            f"the job's body is {stored:,} bytes, more than the large payloads'"
            f" max_bytes ({large.max_bytes:,}), the largest object a worker reads;"
            " send less (pass a reference to the data) or raise max_bytes"
        )
    if len(attributes) >= MAX_MESSAGE_ATTRIBUTES and attributes.pop(
        JOB_TYPE_ATTRIBUTE, None
    ):
        # The job_type attribute is the first to give way, here to the size marker.
        log.warning(
            "propagation_attributes_dropped",
            queue=queue.url,
            dropped=[JOB_TYPE_ATTRIBUTE],
        )
    if len(attributes) >= MAX_MESSAGE_ATTRIBUTES:
        raise ValueError(
            f"a job sent through S3 carries the {SIZE_ATTRIBUTE} attribute, so it may"
            f" have at most {MAX_MESSAGE_ATTRIBUTES - 1} other message attributes;"
            f" it has {len(attributes)}"
        )
    pointer_attributes = {**attributes, SIZE_ATTRIBUTE: _size_value(len(body) * 4)}
    pointer = large.pointer_body(large.prefix + str(uuid.uuid4()))
    size = message_size(pointer, pointer_attributes)
    if size > queue.max_message_size:
        raise ValueError(
            f"even sent through S3 the message is {size:,} bytes (its attributes are"
            f" too large); the queue accepts at most {queue.max_message_size:,}"
        )
    return True


def _size_value(size: int) -> dict[str, str]:
    return {"DataType": "Number", "StringValue": str(size)}


def offload(
    queue: SqsQueue, params: dict[str, t.Any]
) -> tuple[dict[str, t.Any], str | None]:
    """Store the body in S3 when it must be; return the params to send and the key.

    Params whose body is already a pointer (a re-send) are returned as they are.
    """
    large = queue.large_payloads
    if large is None:
        return params, None
    attributes = dict(params.get("MessageAttributes") or {})
    if size_attribute(attributes) is not None:
        return params, None
    if not large.should_offload(
        message_size(params["MessageBody"], attributes), queue.max_message_size
    ):
        return params, None
    key, size = large.upload(params["MessageBody"])
    attributes[SIZE_ATTRIBUTE] = _size_value(size)
    return {
        **params,
        "MessageBody": large.pointer_body(key),
        "MessageAttributes": attributes,
    }, key


def send(queue: SqsQueue, params: dict[str, t.Any]) -> str:
    """SendMessage, through S3 when needed.

    A send SQS refused deletes the object again. One that may have been
    applied (its answer lost) keeps it, as a message may point to it, and is
    retried with a new object (see :mod:`._fresh_copies`).
    """
    staged, key = offload(queue, params)
    if key is None:
        return queue.send(staged)
    large = t.cast(LargePayloads, queue.large_payloads)

    def reupload() -> None:  # the same params go through S3 again
        nonlocal staged, key
        staged, key = offload(queue, params)

    try:
        return send_fresh_copies(
            queue.client,
            lambda: queue.send(staged),
            reupload=reupload,
            refused=lambda: large.discard(key),
            sqs_queue=queue.name,
        )
    except ReuploadFailed as exc:
        raise t.cast(BaseException, exc.__cause__) from None


def after_delete(queue: SqsQueue, pointer: Pointer | None) -> None:
    """The message of ``pointer`` was deleted after processing: drop its object."""
    large = queue.large_payloads
    if pointer is not None and large is not None and large.delete_after_processing:
        large.delete(pointer)


def offload_entries(
    queue: SqsQueue, staged: list[dict[str, t.Any]]
) -> tuple[list[dict[str, t.Any]], dict[int, str], dict[int, tuple[str, str]]]:
    """Offload the entries that need it, before any is sent.

    Returns the entries to send, the S3 key of each offloaded entry by index,
    and ``(code, message)`` for each entry whose upload failed (it is not sent).
    """
    if queue.large_payloads is None:
        return staged, {}, {}
    entries: list[dict[str, t.Any]] = []
    keys: dict[int, str] = {}
    refused: dict[int, tuple[str, str]] = {}
    for index, params in enumerate(staged):
        try:
            sent, key = offload(queue, params)
        except Exception as exc:
            log.warning("large_payload_upload_failed", error=str(exc))
            refused[index] = (aws_error_code(exc), f"S3 upload failed: {exc}")
            sent, key = params, None
        entries.append(sent)
        if key is not None:
            keys[index] = key
    return entries, keys, refused


def discard_unsent(
    queue: SqsQueue, keys: dict[int, str], results: list[str | tuple[str, str]]
) -> None:
    """Delete the objects of entries SQS refused (best effort)."""
    large = queue.large_payloads
    if large is None:
        return
    for index, key in keys.items():
        if not isinstance(results[index], str):
            large.discard(key)


def warn_prefix_only(queues: cabc.Mapping[str, SqsQueue]) -> None:
    """At a worker's start, say that pointers outside the prefix will not be read.

    Producers other than this library (AWS's extended clients write bare
    UUID keys) are the usual source of such pointers: their jobs would be
    dead-lettered, not run, until ``prefix`` is ``""`` or they use the prefix.
    """
    shared: dict[int, tuple[LargePayloads, list[str]]] = {}
    for name, queue in queues.items():
        large = queue.large_payloads
        if large is not None and large.prefix:
            shared.setdefault(id(large), (large, []))[1].append(name)
    for large, names in shared.values():
        log.warning(
            "large_payload_prefix_enforced",
            queues=names,
            s3_bucket=large.bucket,
            prefix=large.prefix,
            reason=f"pointers to keys outside s3://{large.bucket}/{large.prefix} are"
            " not read: they are dead-lettered (without a dead-letter queue, left"
            " in the queue). AWS's extended clients write keys without a prefix:"
            ' to run their jobs, set "prefix": "" (any key of the bucket) or have'
            " them write under this prefix",
        )
