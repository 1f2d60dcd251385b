"""One SQS queue: its settings and every SQS call the engine makes on it."""

from __future__ import annotations

import threading
import time
import typing as t
import urllib.parse

import structlog

from ..model import DEFAULT_MAX_MESSAGE_SIZE
from ..model import is_finite_number as is_finite_number
from ..model import MAX_BATCH_ENTRIES
from ..model import QueueNotFoundError
from ._batch_calls import change_visibility_batch
from ._batch_calls import delete_batch
from ._errors import aws_error_code
from ._errors import CallError
from ._errors import QUEUE_DOES_NOT_EXIST_CODES
from ._group_commit import GroupCommit
from ._queue_options import check_queue_options as check_queue_options
from ._queue_options import DEFAULT_HEARTBEAT_FRACTION
from ._queue_options import parse_redrive_policy

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from ._large_payloads import LargePayloads

log = structlog.get_logger(__name__)

_ATTRIBUTE_NAMES: list[t.Any] = [
    "VisibilityTimeout",
    "MaximumMessageSize",
    "ContentBasedDeduplication",
    "RedrivePolicy",
]

#: Batch requests of one kind (deletes, visibility changes) in flight at once
#: per queue; a further one starts only when a full batch waits.
MAX_REQUESTS_IN_FLIGHT = 8

#: After a failed read of a queue's attributes, how long the defaults are used
#: before reading again.
ATTRIBUTES_RETRY_SECONDS = 60.0


class SqsQueue:
    """An SQS queue and how the worker treats its messages.

    :param url: the queue URL.
    :param boto_client: a boto3 SQS client (low-level clients are thread-safe).
    :param max_runtime_seconds: how long a job may run before the worker stops
        extending its visibility and leaves it for redelivery.
    :param visibility_timeout: seconds a received message stays invisible, and
        what the heartbeat extends it to; None reads the queue's own setting at
        start-up. ``0`` is honoured (no heartbeat): an undeleted message is
        visible again at once, which is handy in tests.
    :param retry_backoff_seconds: base of the exponential backoff applied when
        a handler raises; None leaves the visibility timeout to decide.
    :param heartbeat_fraction: the heartbeat extends a held message's
        visibility every ``visibility_timeout * heartbeat_fraction`` seconds
        (0.1 to 0.5; default 1/3).
    :param large_payloads: store bodies too large for SQS in S3
        (:class:`~flask_sqs_jobs.engine.LargePayloads`); None sends them as is.
    """

    def __init__(
        self,
        url: str,
        *,
        boto_client: SQSClient,
        max_runtime_seconds: float = 3600,
        visibility_timeout: int | None = None,
        retry_backoff_seconds: float | None = None,
        large_payloads: LargePayloads | None = None,
        heartbeat_fraction: float = DEFAULT_HEARTBEAT_FRACTION,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise ValueError(f"url must be a non-empty queue URL string; got {url!r}")
        check_queue_options(
            max_runtime_seconds=max_runtime_seconds,
            visibility_timeout=visibility_timeout,
            retry_backoff_seconds=retry_backoff_seconds,
            heartbeat_fraction=heartbeat_fraction,
        )
        self._url: str | None = url
        #: The physical queue name, the last segment of the URL.
        self.name = urllib.parse.unquote(
            urllib.parse.urlsplit(url).path.rstrip("/")
        ).rsplit("/", 1)[-1]
        self.is_fifo = self.name.endswith(".fifo")
        self.client = boto_client
        self.max_runtime_seconds = max_runtime_seconds
        self.visibility_timeout = visibility_timeout
        self.retry_backoff_seconds = retry_backoff_seconds
        self.heartbeat_fraction = heartbeat_fraction
        self.large_payloads = large_payloads
        self._attributes: dict[str, str] | None = None
        self._attributes_failed_at = -ATTRIBUTES_RETRY_SECONDS
        self._lock = threading.RLock()
        self._dead_letter_url: str | None = None
        #: (the RedrivePolicy attribute last read, what it parsed to).
        self._parsed_redrive_policy: tuple[str | None, tuple[str, int] | None] = (
            None,
            None,
        )
        self._deletes: GroupCommit[str] = GroupCommit(
            self._delete_batch, max_in_flight=MAX_REQUESTS_IN_FLIGHT
        )
        self._visibility_changes = GroupCommit[tuple[str, int]](
            self.change_visibility_many, max_in_flight=MAX_REQUESTS_IN_FLIGHT
        )

    @classmethod
    def from_name(
        cls,
        name: str,
        *,
        boto_client: SQSClient,
        max_runtime_seconds: float = 3600,
        visibility_timeout: int | None = None,
        retry_backoff_seconds: float | None = None,
        large_payloads: LargePayloads | None = None,
        heartbeat_fraction: float = DEFAULT_HEARTBEAT_FRACTION,
    ) -> t.Self:
        """Return a queue known by name; its URL is looked up on first use.

        :raises QueueNotFoundError: on first use, when SQS has no such queue.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty queue name; got {name!r}")
        queue = cls(
            f"unresolved:///{name}",
            boto_client=boto_client,
            max_runtime_seconds=max_runtime_seconds,
            visibility_timeout=visibility_timeout,
            retry_backoff_seconds=retry_backoff_seconds,
            large_payloads=large_payloads,
            heartbeat_fraction=heartbeat_fraction,
        )
        queue._url = None
        return queue

    @property
    def url(self) -> str:
        """The queue URL (looked up with GetQueueUrl for a queue known by name)."""
        if self._url is None:
            with self._lock:
                if self._url is None:
                    self._url = self._get_queue_url(self.name)
        return self._url

    def _get_queue_url(self, name: str, owner: str | None = None) -> str:
        params: dict[str, str] = {"QueueName": name}
        if owner:
            params["QueueOwnerAWSAccountId"] = owner
        try:
            return self.client.get_queue_url(**t.cast(t.Any, params))["QueueUrl"]
        except Exception as exc:
            if aws_error_code(exc) in QUEUE_DOES_NOT_EXIST_CODES:
                raise QueueNotFoundError(name) from exc
            raise

    def __repr__(self) -> str:
        return f"<SqsQueue {self.name!r}>"

    # -- queue attributes --

    def attributes(self) -> dict[str, str]:
        """Return the queue's attributes, read once; empty while they cannot be read.

        After a failed read the defaults apply, and the read is tried again at
        most every :data:`ATTRIBUTES_RETRY_SECONDS`, so enqueues do not pay
        for it each time.
        """
        attributes = self._attributes
        if attributes is not None:
            return attributes
        with self._lock:
            if self._attributes is not None:
                return self._attributes
            now = time.monotonic()
            if now - self._attributes_failed_at < ATTRIBUTES_RETRY_SECONDS:
                return {}
            try:
                return self.read_attributes()
            except Exception as exc:
                self._attributes_failed_at = now
                log.warning(
                    "queue_attributes_unavailable", sqs_queue=self.name, error=str(exc)
                )
                return {}

    def read_attributes(self) -> dict[str, str]:
        """Read the queue's attributes now (raises on failure) and keep them."""
        response = self.client.get_queue_attributes(
            QueueUrl=self.url, AttributeNames=_ATTRIBUTE_NAMES
        )
        attributes = {str(k): v for k, v in response.get("Attributes", {}).items()}
        self._attributes = attributes
        return attributes

    def ensure_attributes(self) -> dict[str, str]:
        """Return the attributes, reading them first if needed; raises on failure."""
        return (
            self._attributes if self._attributes is not None else self.read_attributes()
        )

    @property
    def max_message_size(self) -> int:
        """The queue's MaximumMessageSize, or 1 MiB when it cannot be read."""
        try:
            return int(
                self.attributes().get("MaximumMessageSize", DEFAULT_MAX_MESSAGE_SIZE)
            )
        except ValueError:
            return DEFAULT_MAX_MESSAGE_SIZE

    @property
    def content_based_deduplication(self) -> bool | None:
        """Whether the FIFO queue deduplicates by content; None if unknown."""
        value = self.attributes().get("ContentBasedDeduplication")
        return None if value is None else value == "true"

    def redrive_policy(self) -> tuple[str, int] | None:
        """Return ``(dead-letter queue ARN, maxReceiveCount)``, or None.

        Read for every job; the policy is parsed (and an unreadable one
        logged) once per value the queue's attributes hold.
        """
        raw = self.attributes().get("RedrivePolicy")
        cached_raw, parsed = self._parsed_redrive_policy
        if raw == cached_raw:
            return parsed
        parsed = parse_redrive_policy(raw, self.name) if raw else None
        self._parsed_redrive_policy = (raw, parsed)
        return parsed

    def dead_letter_url(self) -> str | None:
        """Return the dead-letter queue's URL, resolved once; None if unknown."""
        if self._dead_letter_url is None:
            policy = self.redrive_policy()
            if policy is None:
                return None
            arn = policy[0].split(":")
            try:
                self._dead_letter_url = self._get_queue_url(arn[-1], arn[-2])
            except Exception as exc:
                log.warning(
                    "dead_letter_queue_unresolved", sqs_queue=self.name, error=str(exc)
                )
                return None
        return self._dead_letter_url

    def prepare(self) -> None:
        """Get ready to receive: learn the visibility timeout and redrive policy.

        :raises Exception: no visibility timeout was given and the queue's
            attributes cannot be read (a redrive policy is read best-effort).
        """
        if self.visibility_timeout is None:
            self.resolve_visibility_timeout()
        else:
            self.attributes()

    def resolve_visibility_timeout(self) -> int:
        """Return the visibility timeout, reading the queue's when none was given.

        :raises Exception: the queue's attributes cannot be read.
        """
        if self.visibility_timeout is None:
            attributes = self.ensure_attributes()
            self.visibility_timeout = int(attributes.get("VisibilityTimeout", 30))
        return self.visibility_timeout

    # -- producing --

    def send(self, params: dict[str, t.Any], *, url: str | None = None) -> str:
        """Send one message (SendMessage keyword arguments) and return its MessageId.

        ``url`` sends to another queue (the dead-letter queue) with this client.
        """
        response = self.client.send_message(QueueUrl=url or self.url, **params)
        return response["MessageId"]

    def send_batch(
        self, entries: list[dict[str, t.Any]]
    ) -> list[str | tuple[str, str]]:
        """Send up to ten entries; return each MessageId or ``(code, message)``."""
        response = self.client.send_message_batch(
            QueueUrl=self.url, Entries=t.cast(t.Any, entries)
        )
        results: dict[str, str | tuple[str, str]] = {}
        for ok in response.get("Successful", []):
            results[ok["Id"]] = ok["MessageId"]
        for failed in response.get("Failed", []):
            results[failed["Id"]] = (
                failed.get("Code", "Unknown"),
                failed.get("Message", ""),
            )
        return [
            results.get(entry["Id"], ("Unknown", "SQS did not report on this entry"))
            for entry in entries
        ]

    # -- consuming --

    def receive(self, max_messages: int, wait_seconds: int) -> list[MessageTypeDef]:
        """Receive up to ``max_messages`` messages, long-polling ``wait_seconds``."""
        params: dict[str, t.Any] = {
            "QueueUrl": self.url,
            "MaxNumberOfMessages": max(1, min(MAX_BATCH_ENTRIES, max_messages)),
            "WaitTimeSeconds": wait_seconds,
            "MessageSystemAttributeNames": ["All"],
            # Older SQS-compatible servers only know the deprecated name.
            "AttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        }
        if self.visibility_timeout is not None:
            params["VisibilityTimeout"] = self.visibility_timeout
        return self.client.receive_message(**params).get("Messages", [])

    def delete(self, receipt_handle: str, *, linger: float = 0.0) -> CallError:
        """Delete a message; concurrent calls share DeleteMessageBatch requests.

        :param linger: how long a delete may wait for others to fill a batch.
        """
        return self._deletes.call(receipt_handle, linger)

    def change_visibility(self, receipt_handle: str, seconds: int) -> CallError:
        """Set a message's visibility timeout; concurrent calls are batched."""
        return self._visibility_changes.call((receipt_handle, seconds))

    def change_visibility_many(self, changes: list[tuple[str, int]]) -> list[CallError]:
        """Set the visibility of up to ten messages in one request."""
        return change_visibility_batch(self.client, self.url, changes)

    def _delete_batch(self, receipts: list[str]) -> list[CallError]:
        return delete_batch(self.client, self.url, receipts)
