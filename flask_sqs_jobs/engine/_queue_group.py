"""QueueGroup: the named queues an application sends to and a worker polls."""

from __future__ import annotations

import collections.abc as cabc
import datetime
import random
import typing as t

from ._definitions import check_definition_keys
from ._definitions import check_queue_name
from ._definitions import check_weight
from ._definitions import parse_queue_definitions
from ._definitions import QueueDefinition
from ._exceptions import QueueNotFoundError
from ._exceptions import UnknownQueueError
from ._hooks import Hooks
from ._job import Job
from ._job import JSONObject
from ._job_ids import check_job_id
from ._large_payloads import LargePayloads
from ._middleware import check_single_trace_injector
from ._middleware import compose_produce
from ._middleware import JobMiddleware
from ._offloading import send as send_message
from ._producer import check_correlation_fields
from ._producer import check_job_type
from ._producer import check_options
from ._producer import check_payload
from ._producer import report_enqueued
from ._producer import SendOptions
from ._producer import stage_job
from ._queue import SqsQueue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from ._batch_enqueue import JobSpec
    from ._handlers import HandlerFunc
    from ._handlers import JobHandler


_QUEUE_KEYS = frozenset({"queue", "weight"})


class QueueGroup:
    """Named SQS queues, their polling weights and the middleware around them.

    Applications enqueue to a queue by its logical name; a worker polls every
    queue of the group, visiting higher-weight queues first more often.

    :param queues: logical name -> ``{"queue": SqsQueue, "weight": int}``
        (weight defaults to 1).
    :param middleware: :class:`JobMiddleware` instances, outermost first.
    :param hooks: callbacks for a framework layer (the Flask extension).
    """

    def __init__(
        self,
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any]],
        *,
        middleware: cabc.Sequence[JobMiddleware] = (),
        hooks: Hooks | None = None,
    ) -> None:
        if not isinstance(queues, cabc.Mapping):
            raise TypeError(
                "queues must be a dict of name -> definition; got"
                f" {type(queues).__name__}"
            )
        if not queues:
            raise ValueError("queues must define at least one queue")
        for name, definition in queues.items():
            check_queue_name(name)
            check_definition_keys(name, definition, _QUEUE_KEYS)
        self._queues: dict[str, SqsQueue] = {}
        self._weights: dict[str, int] = {}
        for name, definition in queues.items():
            if "queue" not in definition:
                raise ValueError(
                    f"queue {name!r}: the definition needs a 'queue' (an SqsQueue)"
                )
            queue = definition["queue"]
            if not isinstance(queue, SqsQueue):
                raise TypeError(
                    f"queue {name!r}: 'queue' must be an SqsQueue; got"
                    f" {type(queue).__name__}"
                )
            self._queues[name] = queue
            self._weights[name] = check_weight(name, definition.get("weight", 1))
        self.middleware: tuple[JobMiddleware, ...] = tuple(middleware)
        for item in self.middleware:
            if not isinstance(item, JobMiddleware):
                raise TypeError(
                    f"middleware must be JobMiddleware instances; got {item!r}"
                )
        self.hooks = hooks or Hooks()

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
        return cls._of(resolved, weights, tuple(middleware), hooks or Hooks())

    @classmethod
    def _of(
        cls,
        queues: dict[str, SqsQueue],
        weights: dict[str, int],
        middleware: tuple[JobMiddleware, ...],
        hooks: Hooks,
    ) -> t.Self:
        """A group of checked parts, checked no further."""
        group = cls.__new__(cls)
        QueueGroup._set_parts(group, queues, weights, middleware, hooks)
        return group

    def _set_parts(
        self,
        queues: dict[str, SqsQueue],
        weights: dict[str, int],
        middleware: tuple[JobMiddleware, ...],
        hooks: Hooks,
    ) -> None:
        self._queues = queues
        self._weights = weights
        self.middleware = middleware
        self.hooks = hooks

    # -- the queues --

    @property
    def names(self) -> tuple[str, ...]:
        """The logical queue names, in definition order."""
        return tuple(self._queues)

    def queue(self, name: str) -> SqsQueue:
        """Return the queue named ``name``.

        :raises UnknownQueueError: no such queue (a ``KeyError`` and ``ValueError``).
        """
        try:
            return self._queues[name]
        except (KeyError, TypeError):
            raise UnknownQueueError(name, self._queues) from None

    def items(self) -> tuple[tuple[str, SqsQueue], ...]:
        return tuple(self._queues.items())

    def weight(self, name: str) -> int:
        return self._weights[name]

    def subset(self, names: cabc.Iterable[str]) -> QueueGroup:
        """Return a group of only the named queues, sharing middleware and hooks."""
        chosen = {name: self.queue(name) for name in names}
        weights = {name: self._weights[name] for name in chosen}
        return QueueGroup._of(chosen, weights, self.middleware, self.hooks)

    def polling_order(self, names: cabc.Iterable[str] | None = None) -> list[str]:
        """Return the queue names in a weighted random order.

        A queue comes first with probability weight / total weight, so every
        queue is sometimes first and none is starved.
        """
        candidates = self._queues if names is None else names
        return sorted(
            candidates, key=lambda name: random.expovariate(self._weights[name])
        )

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
    ) -> str:
        """Send a job and return its SQS MessageId.

        Everything is validated before anything is sent. ``delay_seconds``
        above 900 (or ``run_at``, an aware datetime, further than 15 minutes
        ahead) defers the job: it is re-sent until it is due. ``job_id``
        (1-128 characters of ``A-Za-z0-9_.:-``, a random id by default)
        travels in the body and is on the :class:`Job` middleware, hooks and
        handlers see.

        :raises TypeError, ValueError: an argument is wrong; the message names
            it and the fix. :class:`UnknownQueueError` for an unknown queue.
        """
        sqs_queue = self.queue(queue)
        job = Job(
            job_type=check_job_type(job_type),
            payload=check_payload(payload),
            queue=queue,
            correlation_fields=check_correlation_fields(correlation_fields),
            job_id=check_job_id(job_id),
        )
        options = check_options(
            sqs_queue,
            queue,
            {
                "message_group_id": message_group_id,
                "message_deduplication_id": message_deduplication_id,
                "delay_seconds": delay_seconds,
                "message_attributes": message_attributes,
                "run_at": run_at,
            },
        )
        check_single_trace_injector(self.middleware)

        def send(job: Job) -> str:
            return self.send_job(job, options)

        return compose_produce(self.middleware, send)(job)

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
        from ._batch_enqueue import enqueue_many

        return enqueue_many(self, queue, jobs)

    def send_job(self, job: Job, options: SendOptions) -> str:
        """Send an already validated job: the end of the ``produce`` chain.

        :meta private:
        """
        sqs_queue = self.queue(job.queue)
        check_job_type(job.job_type)
        check_payload(job.payload)
        params = stage_job(sqs_queue, job, options)
        message_id = send_message(sqs_queue, params)
        report_enqueued(self.hooks, job, message_id)
        return message_id

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
        from ._runner import run_worker

        run_worker(
            self, handlers, idle_wait_seconds=idle_wait_seconds, concurrency=concurrency
        )
