"""QueueGroup: the named queues an application sends to and a worker polls."""

from __future__ import annotations

import collections.abc as cabc
import datetime
import typing as t

from . import producing
from .model import Hooks
from .model import JobMiddleware
from .model import JSONObject
from .model import QueueNotFoundError
from .sqs import LargePayloads
from .sqs import NamedQueues
from .sqs import parse_queue_definitions
from .sqs import priority_levels
from .sqs import QueueDefinition
from .sqs import SqsQueue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from .model import HandlerFunc
    from .model import JobHandler
    from .producing import JobSpec


_QUEUE_KEYS = frozenset({"queue", "weight"})


class QueueGroup(NamedQueues):
    """Named SQS queues, their polling weights and the middleware around them.

    Applications enqueue to a queue by its logical name; a worker polls every
    queue of the group, visiting higher-weight queues first more often.

    :param queues: logical name -> ``{"queue": SqsQueue, "weight": int}``
        (weight defaults to 1).
    :param middleware: :class:`JobMiddleware` instances, outermost first.
    :param hooks: callbacks for a framework layer (the Flask extension).
    """

    @classmethod
    def build(
        cls,
        *,
        boto_client: SQSClient,
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any] | QueueDefinition],
        middleware: cabc.Sequence[JobMiddleware] = (),
        hooks: Hooks | None = None,
        resolve: bool = True,
        large_payloads: LargePayloads | None = None,
    ) -> t.Self:
        """Build a group from queue names or URLs.

        Each definition has exactly one of ``name`` (resolved with GetQueueUrl)
        or ``url``, and optionally ``weight`` (a positive int, default 1),
        ``visibility_timeout``, ``max_runtime_seconds``,
        ``retry_backoff_seconds`` and ``heartbeat_fraction`` (see
        :class:`SqsQueue`).

        :param resolve: look queue names up now; with False each name is
            looked up on first use instead.
        :param large_payloads: store bodies too large for SQS in S3, on every
            queue of the group (see ``docs/large-payloads.md``).
        :raises TypeError, ValueError: a definition is wrong; the message names
            the queue and the key. :class:`QueueNotFoundError` (a
            ``ValueError``) when a named queue does not exist.
        """
        definitions = parse_queue_definitions(queues)
        resolved: dict[str, SqsQueue] = {}
        for name, definition in definitions.items():
            queue = definition.build_queue(boto_client)
            queue.large_payloads = large_payloads
            if resolve:
                try:
                    queue.url  # noqa: B018 - resolves the name with GetQueueUrl
                except QueueNotFoundError as exc:
                    raise QueueNotFoundError(exc.queue_name, logical_name=name) from exc
            resolved[name] = queue
        weights = {name: d.weight for name, d in definitions.items()}
        group = cls._of(resolved, weights, tuple(middleware), hooks or Hooks())
        group.priority_levels = priority_levels(definitions.values())
        return group

    # -- producing --

    def enqueue(
        self,
        queue: str,
        job_type: str,
        payload: JSONObject | None = None,
        *,
        correlation_fields: JSONObject | None = None,
        message_group_id: str | None = None,
        message_deduplication_id: str | None = None,
        delay_seconds: int | None = None,
        message_attributes: dict[str, dict[str, t.Any]] | None = None,
        run_at: datetime.datetime | None = None,
        job_id: str | None = None,
        max_runtime_seconds: float | None = None,
        expires_in: float | None = None,
        expires_at: datetime.datetime | None = None,
        priority: int | None = None,
        unique: bool = False,
        unique_key: str | None = None,
        unique_for: float | None = None,
        unique_until: str | None = None,
        on_duplicate: str | None = None,
        tenant: str | None = None,
        tags: cabc.Sequence[str] | None = None,
        buffered: bool = False,
    ) -> str:
        """Send a job and return its SQS MessageId (its job id when
        ``buffered``: the group's send buffer sends it within its window).

        Everything is validated before anything is sent. ``delay_seconds``
        above 900 (or ``run_at``, an aware datetime, further than 15 minutes
        ahead) defers the job: it is re-sent until it is due. ``job_id``
        (1-128 characters of ``A-Za-z0-9_.:-``, a random id by default)
        travels in the body and is on the :class:`Job` middleware, hooks and
        handlers see. ``max_runtime_seconds`` (above 0, at most 12 hours)
        is the job's own runtime limit: the worker stops it at the smaller of
        that and its handler's (else its queue's) limit. ``expires_in``
        (seconds) or ``expires_at`` (an aware datetime): a worker receiving the
        job later deletes it unrun (outcome ``expired``). ``priority``: the
        level (0 the highest) on a queue with ``priority_levels``; see
        ``docs/flow-control.md``.

        ``unique=True`` (key: the job type and payload) or ``unique_key=``
        sends nothing while another job holds the key (see
        ``docs/flow-control.md``): the holder's job id is returned instead,
        or :class:`DuplicateJobError` raised with ``on_duplicate="raise"``.
        The group needs a store's keys (:func:`use_unique_keys`). ``tenant`` (on a
        standard queue) sets the MessageGroupId that SQS fair queues share
        capacity by. ``tags`` (at most 10 strings of at most 64 characters)
        travel in the body into the job's record, for ``find_jobs(tag=...)``.

        :raises TypeError, ValueError: an argument is wrong; the message names
            it and the fix. :class:`UnknownQueueError` for an unknown queue.
        """
        return producing.enqueue(
            self,
            queue,
            job_type,
            payload,
            {
                "correlation_fields": correlation_fields,
                "message_group_id": message_group_id,
                "message_deduplication_id": message_deduplication_id,
                "delay_seconds": delay_seconds,
                "message_attributes": message_attributes,
                "run_at": run_at,
                "job_id": job_id,
                "max_runtime_seconds": max_runtime_seconds,
                "expires_in": expires_in,
                "expires_at": expires_at,
                "priority": priority,
                "unique": unique,
                "unique_key": unique_key,
                "unique_for": unique_for,
                "unique_until": unique_until,
                "on_duplicate": on_duplicate,
                "tenant": tenant,
                "tags": tags,
                "buffered": buffered,
            },
        )

    def enqueue_many(self, queue: str, jobs: cabc.Iterable[JobSpec]) -> list[str]:
        """Send many jobs with SendMessageBatch; return their MessageIds in order.

        Each job is a ``(job_type, payload)`` pair or a dict with ``job_type``,
        ``payload`` and any :meth:`enqueue` option (``job_id`` included). Every
        job is checked before any is sent; requests carry at most ten jobs and
        stay within the queue's size limit.

        :raises TypeError, ValueError: a job is wrong (the message names its
            index); nothing was sent.
        :raises EnqueueBatchError: SQS refused some jobs; ``.enqueued`` lists
            ``(index, message_id)`` of those sent, ``.failed`` lists
            ``(index, code, message)`` of the others.
        """
        return producing.enqueue_many(self, queue, jobs)

    def run_worker(
        self,
        handlers: cabc.Mapping[str, HandlerFunc | JobHandler],
        *,
        idle_wait_seconds: int = 20,
        concurrency: int = 1,
    ) -> None:
        """Run a worker in this process until SIGTERM or SIGINT.

        The first signal stops receiving and lets running jobs finish; a second
        one releases every held message and exits at once. Returns after a
        graceful stop.

        :raises SystemExit: with code 1 after persistent receive failures.
        """
        from .worker import run_worker

        run_worker(
            self, handlers, idle_wait_seconds=idle_wait_seconds, concurrency=concurrency
        )
