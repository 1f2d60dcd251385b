"""Large payloads through S3, in the format of AWS's SQS Extended Client.

A message too large for SQS (or every message, with ``always``) is stored as
an S3 object and sent as a pointer::

    ["software.amazon.payloadoffloading.PayloadS3Pointer",
     {"s3BucketName": "<bucket>", "s3Key": "<key>"}]

with a Number message attribute ``ExtendedPayloadSize`` holding the original
body's size in bytes, so AWS's Java and Python extended clients can produce
for and consume from the same queues. The legacy names written by older
clients (``com.amazon.sqs.javamessaging.MessageS3Pointer``,
``SQSLargePayloadSize``) are read too.

A pointer is untrusted: it is only followed when it names the configured
bucket and a key under the configured prefix (a folder: ``sqs-jobs`` means
``sqs-jobs/``; ``""`` admits any key of the bucket), so a hostile producer
cannot make the worker read or delete other objects, and what is read is
bounded by ``max_bytes`` (see ``_large_payloads_reading``).
"""

from __future__ import annotations

import dataclasses
import json
import typing as t
import uuid

import structlog

from ..model import loggable_text
from ..model import NonRetryableError
from ._large_payloads_options import check_options
from ._large_payloads_options import DEFAULT_MAX_BYTES
from ._large_payloads_options import MAX_KEY_LENGTH
from ._large_payloads_options import normalize_prefix

log = structlog.get_logger(__name__)

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
LEGACY_POINTER_CLASS = "com.amazon.sqs.javamessaging.MessageS3Pointer"
SIZE_ATTRIBUTE = "ExtendedPayloadSize"
LEGACY_SIZE_ATTRIBUTE = "SQSLargePayloadSize"
_POINTER_CLASSES = frozenset({POINTER_CLASS, LEGACY_POINTER_CLASS})
_SIZE_ATTRIBUTES = (SIZE_ATTRIBUTE, LEGACY_SIZE_ATTRIBUTE)
#: The attributes that mark a message as a pointer: a re-send never drops them.
POINTER_ATTRIBUTES = frozenset(_SIZE_ATTRIBUTES)
#: A pointer body is small; anything longer is not one.
_MAX_POINTER_BODY = 4096
#: S3 error codes meaning the object is gone.
NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})

#: A boto3 S3 client (typed loosely: the project carries no S3 stubs).
S3Client: t.TypeAlias = t.Any


class PayloadNotFound(NonRetryableError):
    """A message points to an S3 object that does not exist (any more).

    No retry can bring it back: the message is dead-lettered with this reason
    where the queue has a dead-letter queue, otherwise deleted.
    """


class PayloadTooLarge(NonRetryableError):
    """An offloaded body is larger than ``max_bytes``, or than its pointer announces.

    It is never read whole: the message is dead-lettered with this reason
    where the queue has a dead-letter queue, otherwise deleted; the object is
    kept in S3 for inspection.
    """


class PayloadUnreadable(NonRetryableError):
    """An offloaded body is not UTF-8, or not a job (not JSON, not an object, ...).

    Settled as :class:`PayloadTooLarge` is; the object is kept in S3.
    """


class PointerRefused(NonRetryableError):
    """A pointer names another bucket, or a key outside the configured prefix.

    The object is neither read nor deleted, and neither is the message: it is
    dead-lettered with this reason where the queue has a dead-letter queue,
    otherwise left to come back (a worker configured for it may read it).
    """


@dataclasses.dataclass(frozen=True)
class Pointer:
    """Where an offloaded body lives."""

    bucket: str
    key: str
    #: The body's size as the message says (``ExtendedPayloadSize``), if given.
    size: int | None = None


class LargePayloads:
    """Store message bodies too large for SQS in S3 (the SQS Extended Client way).

    :param s3_client: a boto3 S3 client.
    :param bucket: the bucket objects are written to, and the only one read.
    :param prefix: the folder of every object written (``"sqs-jobs"`` means
        ``"sqs-jobs/"``); pointers to keys outside it are refused, and ``""``
        admits any key of the bucket (for AWS's extended clients' bare keys).
    :param threshold_bytes: offload when body plus attributes exceed this;
        None means the queue's MaximumMessageSize.
    :param always: offload every message.
    :param delete_after_processing: delete the object once its message is
        deleted after processing.
    :param max_bytes: the largest object a worker reads; a larger one, or one
        larger than its pointer announces, is dead-lettered, never read whole.
    """

    def __init__(
        self,
        s3_client: S3Client,
        *,
        bucket: str,
        prefix: str = "sqs-jobs/",
        threshold_bytes: int | None = None,
        always: bool = False,
        delete_after_processing: bool = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        check_options(
            bucket=bucket,
            prefix=prefix,
            threshold_bytes=threshold_bytes,
            always=always,
            delete_after_processing=delete_after_processing,
            max_bytes=max_bytes,
        )
        self.s3_client = s3_client
        self.bucket = bucket
        self.prefix = normalize_prefix(prefix)
        self.max_bytes = max_bytes
        self.threshold_bytes = threshold_bytes
        self.always = always
        self.delete_after_processing = delete_after_processing

    def __repr__(self) -> str:
        return f"<LargePayloads s3://{self.bucket}/{self.prefix}>"

    # -- producing --

    def should_offload(self, size: int, queue_limit: int) -> bool:
        """Whether a message of ``size`` bytes goes through S3."""
        if self.always:
            return True
        threshold = queue_limit
        if self.threshold_bytes is not None:
            threshold = min(self.threshold_bytes, queue_limit)
        return size > threshold

    def pointer_body(self, key: str) -> str:
        """The message body pointing at ``key``, as the extended clients write it."""
        return json.dumps([POINTER_CLASS, {"s3BucketName": self.bucket, "s3Key": key}])

    def new_key(self) -> str:
        return f"{self.prefix}{uuid.uuid4()}"

    def upload(self, body: str) -> tuple[str, int]:
        """Write ``body`` as a new object; return its key and size in bytes."""
        data = body.encode()
        key = self.new_key()
        self.s3_client.put_object(Bucket=self.bucket, Key=key, Body=data)
        return key, len(data)

    def discard(self, key: str) -> None:
        """Delete an object whose message was not sent (best effort, logged)."""
        try:
            self.s3_client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            log.warning(
                "large_payload_cleanup_failed",
                s3_bucket=self.bucket,
                s3_key=key,
                error=str(exc),
            )

    # -- consuming --

    def read_pointer(self, body: object, attributes: object) -> Pointer | str | None:
        """Return the pointer a received message carries, None, or why it is malformed.

        A message is a pointer when it carries ``ExtendedPayloadSize`` (or the
        legacy ``SQSLargePayloadSize``), as AWS's clients decide. Whether it
        may be followed is :meth:`refusal`'s answer.
        """
        announced = size_attribute(attributes)
        if announced is None:
            return None
        if not isinstance(body, str) or len(body) > _MAX_POINTER_BODY:
            return "large payload pointer is not a pointer body"
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return "large payload pointer is not JSON"
        if (
            not isinstance(data, list)
            or len(data) != 2
            or data[0] not in _POINTER_CLASSES
            or not isinstance(data[1], dict)
        ):
            return "large payload pointer is malformed"
        bucket, key = data[1].get("s3BucketName"), data[1].get("s3Key")
        if not isinstance(bucket, str) or not isinstance(key, str) or not key:
            return "large payload pointer lacks s3BucketName or s3Key"
        return Pointer(bucket, key, announced)

    def refusal(self, pointer: Pointer) -> str | None:
        """Why ``pointer`` may not be followed (read or deleted), or None."""
        key = pointer.key
        if pointer.bucket != self.bucket:
            return "pointer outside the configured bucket/prefix (another bucket)"
        if (
            not key.startswith(self.prefix)
            or len(key) == len(self.prefix)
            or len(key) > MAX_KEY_LENGTH
            or not key.isprintable()
            or "/../" in f"/{key}/"
        ):
            return (
                "pointer outside the configured bucket/prefix (a key outside"
                f" {self.prefix!r})"
                if self.prefix
                else "pointer outside the configured bucket/prefix (an invalid key)"
            )
        return None

    def describe(self, pointer: Pointer) -> str:
        """``s3://bucket/key``, escaped for logs and reasons."""
        bucket, key = loggable_text(pointer.bucket, 64), loggable_text(pointer.key, 256)
        return f"s3://{bucket}/{key}"

    def delete(self, pointer: Pointer) -> None:
        """Delete a processed message's object (best effort, logged)."""
        try:
            self.s3_client.delete_object(Bucket=pointer.bucket, Key=pointer.key)
        except Exception as exc:
            log.warning(
                "large_payload_delete_failed",
                s3_key=loggable_text(pointer.key, 256),
                error=str(exc),
            )


def size_attribute(attributes: object) -> int | None:
    """The size a pointer message announces; -1 when present but unreadable."""
    if not isinstance(attributes, dict):
        return None
    for name in _SIZE_ATTRIBUTES:
        attribute = attributes.get(name)
        if isinstance(attribute, dict):
            try:
                return int(str(attribute.get("StringValue")))
            except ValueError:
                return -1
    return None


def offloaded_size(message: t.Mapping[str, t.Any]) -> int | None:
    """The offloaded size of a (dead-letter) message, or None if not offloaded."""
    return size_attribute(message.get("MessageAttributes"))
