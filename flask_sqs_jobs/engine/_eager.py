"""Eager mode: enqueue runs the handler inline, through the real processing path."""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import dataclasses
import time
import typing as t
import uuid

from ._queue_group import QueueGroup
from .model import check_job_id
from .model import check_single_trace_injector
from .model import compose_produce
from .model import IdempotencyKeys
from .model import Job
from .model import JobHandler
from .model import SessionFactory
from .producing import build_send_params
from .producing import check_job_type
from .producing import check_payload
from .producing import JobSpec
from .producing import prepare_job
from .producing import report_enqueued
from .producing import SendOptions
from .sqs import CallError
from .sqs import QueueDefinition
from .sqs import SqsQueue
from .worker import Delivery
from .worker import Heartbeat
from .worker import JobGuard
from .worker import JobRunner
from .worker import Lease
from .worker import Settler


class EagerQueue(SqsQueue):
    """A queue that never calls SQS: nothing to read, delete or release."""

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


class EagerQueueGroup(QueueGroup):
    """A :class:`QueueGroup` whose sends run the job at once in this thread.

    The job still makes the JSON round trip, passes the middleware, runs in a
    fresh app context and sends the signals. Delays and ``run_at`` are ignored:
    the job runs now. An exception raised by the handler propagates to the
    caller of ``enqueue``, so a test sees it. Idempotent handlers claim their
    keys when ``idempotency_keys`` is given, and run as plain handlers without.
    """

    def __init__(
        self,
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any]],
        handlers: cabc.Mapping[str, JobHandler],
        *,
        idempotency_keys: IdempotencyKeys | None = None,
        session_factory: SessionFactory | None = None,
        **kwargs: t.Any,
    ) -> None:
        super().__init__(queues, **kwargs)
        self._eager_handlers = handlers
        heartbeat = Heartbeat()
        if idempotency_keys is None:
            handlers = {
                name: dataclasses.replace(h, idempotent=False, idempotency_key=None)
                for name, h in handlers.items()
            }
        guard = JobGuard(idempotency_keys, session_factory)
        self._runner = JobRunner(
            handlers, self.middleware, heartbeat, self.hooks, guard
        )
        self._settler = Settler(heartbeat, self.hooks, lambda: sorted(handlers))

    def enqueue_many(self, queue: str, jobs: cabc.Iterable[JobSpec]) -> list[str]:
        """Check every job, then run each one at once, in order."""
        sqs_queue = self.queue(queue)
        prepared = [
            prepare_job(sqs_queue, queue, i, spec) for i, spec in enumerate(jobs)
        ]
        check_single_trace_injector(self.middleware)
        for job, _ in prepared:
            self._check_handler(job.job_type)
        message_ids = []
        for job, options in prepared:

            def send(job: Job, options: SendOptions = options) -> str:
                return self.send_job(job, options)

            message_ids.append(compose_produce(self.middleware, send)(job))
        return message_ids

    def _check_handler(self, job_type: str) -> None:
        if job_type not in self._eager_handlers:
            raise LookupError(
                f"SQS_JOBS_EAGER: no handler is registered for job type"
                f" {job_type!r}; register one with @jobs.handler({job_type!r})"
            )

    def send_job(self, job: Job, options: SendOptions) -> str:
        sqs_queue = self.queue(job.queue)
        check_job_type(job.job_type)
        check_payload(job.payload)
        self._check_handler(job.job_type)
        job.job_id = check_job_id(job.job_id)
        now_options = SendOptions(
            message_group_id=options.message_group_id,
            message_deduplication_id=options.message_deduplication_id,
            message_attributes=options.message_attributes,
        )
        params, _ = build_send_params(sqs_queue, job.queue, job, now_options)
        message_id = str(uuid.uuid4())
        report_enqueued(self.hooks, job, message_id, eager=True)
        attributes = {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(int(time.time() * 1000)),
        }
        if options.message_group_id is not None:
            attributes["MessageGroupId"] = options.message_group_id
        receipt = f"eager-{message_id}"
        message = {
            "MessageId": message_id,
            "ReceiptHandle": receipt,
            "Body": params["MessageBody"],
            "MessageAttributes": params.get("MessageAttributes", {}),
            "Attributes": attributes,
        }
        lease = Lease(sqs_queue, job.queue, receipt, message_id, time.monotonic())
        delivery = Delivery(job.queue, sqs_queue, message, lease)
        # An empty context, as in a worker thread: the job sees no request (nor
        # the caller's app context), so eager tests catch a handler that needs one.
        exception = contextvars.Context().run(self._process, delivery)
        if exception is not None:
            raise exception
        return message_id

    def _process(self, delivery: Delivery) -> BaseException | None:
        ran = self._runner.run(delivery)
        try:
            self._settler.settle(ran)
        finally:
            ran.close()
        return ran.exception


def eager_queue(definition: QueueDefinition) -> EagerQueue:
    """Return an offline queue for a checked ``SQS_JOBS_QUEUES`` definition."""
    url = definition.url or f"eager:///{definition.name}"
    return EagerQueue(
        url,
        boto_client=t.cast(t.Any, None),
        visibility_timeout=0,
        max_runtime_seconds=definition.max_runtime_seconds,
        retry_backoff_seconds=definition.retry_backoff_seconds,
    )
