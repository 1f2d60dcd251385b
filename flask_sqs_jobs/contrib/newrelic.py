"""New Relic transactions and distributed tracing for jobs (the ``newrelic`` extra).

::

    import newrelic.agent
    from flask_sqs_jobs.contrib.newrelic import NewRelicMiddleware

    newrelic.agent.initialize("newrelic.ini")
    jobs = SQSJobs(middleware=[NewRelicMiddleware()])

Supports the Python agent 9.0 and later.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses

import structlog

from ..engine.model import Job
from ..engine.model import JobMiddleware
from ._guard import as_trace_id
from ._guard import bind_trace
from ._guard import is_reported
from ._guard import missing_sdk
from ._guard import new_span_id
from ._guard import new_trace_id
from ._guard import parse_traceparent
from ._guard import traced
from ._guard import Vendor

try:
    import newrelic.agent
except ImportError as exc:
    raise missing_sdk(__name__, "newrelic", "newrelic") from exc

__all__ = ["NewRelicMiddleware"]

_vendor = Vendor("newrelic")


class NewRelicMiddleware(JobMiddleware):
    """Run each job as a New Relic background task that continues the producer's trace.

    On enqueue, the agent's distributed-trace headers (``newrelic``,
    ``traceparent``, ``tracestate``) are added to the job. On consume, each
    job is a background task (group ``group``, named after its job type) that
    accepts them with transport type ``Queue``; inside a running transaction
    (eager mode in a request) it is a function trace instead. A handler
    exception is noticed, then re-raised so the worker still decides the
    outcome.

    Where the agent cannot link the trace (it added no headers: not running,
    distributed tracing off), the job carries a W3C ``traceparent`` made up
    here, so the producer's and the consumer's log lines still share one
    ``trace_id``. While a job runs, its log lines carry ``trace_id`` and
    ``span_id`` (from the agent's linking metadata when it has them).

    A failure inside the agent is logged (``integration_failed``) and never
    changes a job's outcome.

    :param application: the New Relic application name; the agent's
        configured one by default.
    :param group: the transaction group of the background tasks.
    :param report_non_retryable: also notice
        :class:`~flask_sqs_jobs.NonRetryableError` (a job that cannot succeed).
        :class:`~flask_sqs_jobs.RetryJob` is never noticed.
    """

    injects_trace_headers = True
    keeps_payload = True  # only trace headers and spans change

    def __init__(
        self,
        *,
        application: str | None = None,
        group: str = "SQSJob",
        report_non_retryable: bool = False,
    ) -> None:
        self.application = application
        self.group = group
        self.report_non_retryable = report_non_retryable

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        return traced(_vendor, "produce", job, call_next, _start_send)

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        return traced(_vendor, "consume", job, call_next, self._start_task)

    def _start_task(self, job: Job, stack: contextlib.ExitStack) -> _Task:
        if newrelic.agent.current_transaction() is None:
            application = newrelic.agent.application(self.application)
            stack.enter_context(
                newrelic.agent.BackgroundTask(
                    application, name=job.job_type, group=self.group
                )
            )
            newrelic.agent.accept_distributed_trace_headers(
                dict(job.trace_headers), transport_type="Queue"
            )
        else:
            stack.enter_context(
                newrelic.agent.FunctionTrace(name=job.job_type, group=self.group)
            )
        newrelic.agent.add_custom_attributes(
            [
                ("sqs_jobs.queue", job.queue),
                ("sqs_jobs.message_id", job.message_id or ""),
                ("sqs_jobs.receive_count", job.receive_count or 0),
            ]
        )
        linked = _linked_ids()
        if linked is None:
            header = parse_traceparent(job.trace_headers.get("traceparent"))
            linked = (header[0] if header else new_trace_id(), new_span_id())
        bind_trace(None, *linked)
        return _Task(self.report_non_retryable)


def _start_send(job: Job, stack: contextlib.ExitStack) -> _Send:
    headers: list[tuple[str, str]] = []
    newrelic.agent.insert_distributed_trace_headers(headers)
    for name, value in headers:
        job.trace_headers[str(name)] = str(value)
    linked = _linked_ids()
    if not headers:
        trace_id = linked[0] if linked else _bound_trace_id() or new_trace_id()
        span_id = linked[1] if linked else new_span_id()
        # Flags 00: nothing was recorded for this parent.
        job.trace_headers["traceparent"] = f"00-{trace_id}-{span_id}-00"
        linked = (trace_id, span_id)
    if linked is not None:
        bind_trace(stack, *linked)
    return _Send()


def _linked_ids() -> tuple[str, str] | None:
    """The agent's trace and span ids for the current transaction, if any."""
    metadata = newrelic.agent.get_linking_metadata()
    trace_id = metadata.get("trace.id")
    span_id = metadata.get("span.id")
    if not trace_id or not span_id:
        return None
    return str(trace_id), str(span_id)


def _bound_trace_id() -> str | None:
    """A W3C trace id already in the log context (bound by the application)."""
    return as_trace_id(structlog.contextvars.get_contextvars().get("trace_id"))


@dataclasses.dataclass
class _Send:
    def succeeded(self, message_id: str) -> None:
        pass

    def failed(self, error: Exception) -> None:
        pass


@dataclasses.dataclass
class _Task:
    report_non_retryable: bool

    def succeeded(self, result: None) -> None:
        pass

    def failed(self, error: Exception) -> None:
        if is_reported(error, report_non_retryable=self.report_non_retryable):
            newrelic.agent.notice_error(error=(type(error), error, error.__traceback__))
