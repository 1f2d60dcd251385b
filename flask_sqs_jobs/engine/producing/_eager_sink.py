"""Eager mode's sink: a staged message runs at once, through the worker's own parts.

``SQS_JOBS_EAGER`` builds a plain :class:`~flask_sqs_jobs.QueueGroup` whose
queues are :class:`EagerQueue`\\ s; the pipeline hands what is produced on
them to their :class:`EagerSink`, which makes the message a worker would
receive and runs it with the worker's :class:`JobProcessing` (its
:class:`JobRunner` and :class:`Settler`). Nothing here does a worker's job a
second way.
"""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import dataclasses
import time
import typing as t
import uuid

from ..model import Hooks
from ..model import IdempotencyKeys
from ..model import JobHandler
from ..model import JobMiddleware
from ..model import SessionFactory
from ..sqs import CallError
from ..sqs import QueueDefinition
from ..sqs import SqsQueue
from ..worker import Delivery
from ..worker import Heartbeat
from ..worker import JobGuard
from ..worker import JobProcessing
from ..worker import Lease
from ._sinks import Sink

if t.TYPE_CHECKING:
    from ._prepare import PreparedJob
    from ._staging import StagedMessage


class EagerSink(Sink):
    """Runs each job it is handed in the caller's thread, as a worker would.

    Contract: called by the pipeline inside the job's produce chain (so
    produce middleware wraps the run); :meth:`send` gives the message a
    random MessageId, the pipeline reports ``job_enqueued`` (with
    ``eager=True``), then :meth:`sent` runs both phases
    (:class:`JobProcessing`, the worker's own) in an empty context, as a
    worker thread would, and raises the handler's exception to the caller. Delays
    are dropped at :meth:`admit`: the job runs now. Holds no state of its own
    between jobs; one sink serves every queue of an eager group.

    :param handlers: job type -> handler, as the worker gets them.
    :param idempotency_keys: the store's keys; without them idempotent
        handlers run as plain ones.
    """

    log_fields: t.ClassVar[t.Mapping[str, object]] = {"eager": True}

    def __init__(
        self,
        handlers: cabc.Mapping[str, JobHandler],
        *,
        middleware: cabc.Sequence[JobMiddleware] = (),
        hooks: Hooks | None = None,
        idempotency_keys: IdempotencyKeys | None = None,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self._handlers = handlers
        hooks = hooks or Hooks()
        heartbeat = Heartbeat()
        if idempotency_keys is None:
            handlers = {
                name: dataclasses.replace(h, idempotent=False, idempotency_key=None)
                for name, h in handlers.items()
            }
        guard = JobGuard(idempotency_keys, session_factory)
        self._processing = JobProcessing.build(
            handlers, middleware, heartbeat, hooks, guard
        )

    def admit(self, prepared: PreparedJob) -> PreparedJob:
        """Refuse a job type without a handler; drop delays (the job runs now)."""
        self._check_handler(prepared.job.job_type)
        options = prepared.options
        if options.delay_seconds is not None or options.run_at is not None:
            prepared.options = dataclasses.replace(
                options, delay_seconds=None, run_at=None
            )
        return prepared

    def send(self, message: StagedMessage) -> str:
        """A random MessageId (the UUID form SQS uses); the job runs in :meth:`sent`."""
        # Middleware may have changed the job type: check it again.
        self._check_handler(message.job.job_type)
        return str(uuid.uuid4())

    def sent(self, message: StagedMessage, message_id: str) -> None:
        """Run the job as received: phase one, phase two, then its scope ends."""
        params = message.params
        attributes = {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(int(time.time() * 1000)),
        }
        if "MessageGroupId" in params:
            attributes["MessageGroupId"] = params["MessageGroupId"]
        receipt = f"eager-{message_id}"
        received = {
            "MessageId": message_id,
            "ReceiptHandle": receipt,
            "Body": params["MessageBody"],
            "MessageAttributes": params.get("MessageAttributes", {}),
            "Attributes": attributes,
        }
        name = message.job.queue
        lease = Lease(message.queue, name, receipt, message_id, time.monotonic())
        delivery = Delivery(name, message.queue, received, lease)
        # An empty context, as in a worker thread: the job sees no request (nor
        # the caller's app context), so eager tests catch a handler that needs one.
        processed = self._processing.process(delivery, contextvars.Context())
        if processed.exception is not None:
            raise processed.exception

    def _check_handler(self, job_type: str) -> None:
        if job_type not in self._handlers:
            raise LookupError(
                f"SQS_JOBS_EAGER: no handler is registered for job type"
                f" {job_type!r}; register one with @jobs.handler({job_type!r})"
            )


class EagerQueue(SqsQueue):
    """A queue that never calls SQS: what is produced on it runs through :attr:`sink`.

    Nothing to read, delete or release: the settle phase's calls answer at
    once without a request.
    """

    #: Where the pipeline hands what is produced on this queue.
    sink: EagerSink

    def attributes(self) -> dict[str, str]:
        return {}

    def resolve_visibility_timeout(self) -> int:
        return 0

    def redrive_policy(self) -> tuple[str, int] | None:
        return None

    def delete(self, receipt_handle: str, *, linger: float = 0.0) -> CallError:
        return None

    def change_visibility(self, receipt_handle: str, seconds: int) -> CallError:
        return None


def eager_queue(definition: QueueDefinition, sink: EagerSink) -> EagerQueue:
    """An offline queue for a checked ``SQS_JOBS_QUEUES`` definition.

    What is produced on it runs through ``sink``.
    """
    url = definition.url or f"eager:///{definition.name}"
    queue = EagerQueue(
        url,
        boto_client=t.cast(t.Any, None),
        visibility_timeout=0,
        max_runtime_seconds=definition.max_runtime_seconds,
        retry_backoff_seconds=definition.retry_backoff_seconds,
    )
    queue.sink = sink
    return queue


def eager_queues(
    definitions: cabc.Mapping[str, QueueDefinition], sink: EagerSink
) -> dict[str, dict[str, t.Any]]:
    """``QueueGroup``'s queues for eager mode: each definition's :func:`eager_queue`."""
    return {
        name: {"queue": eager_queue(definition, sink), "weight": definition.weight}
        for name, definition in definitions.items()
    }
