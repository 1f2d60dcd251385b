"""JobMiddleware: produce, poll and consume wrap their phase, Rack-style."""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import json
import typing as t

import pytest
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue

from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def group_with(sqs: SQSClient, url: str, *middleware: JobMiddleware) -> QueueGroup:
    queue = SqsQueue(url, boto_client=sqs, visibility_timeout=0)
    return QueueGroup({"jobs": {"queue": queue}}, middleware=middleware)


class Recorder(JobMiddleware):
    """Records entering and leaving each phase, one trail per phase."""

    def __init__(self, name: str, trails: dict[str, list[str]]) -> None:
        self.name = name
        self.trails = trails

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        self.trails["produce"].append(f"{self.name}:in")
        message_id = call_next(job)
        self.trails["produce"].append(f"{self.name}:out")
        return message_id

    def poll(self, call_next: cabc.Callable[[], None]) -> None:
        self.trails["poll"].append(f"{self.name}:in")
        call_next()
        self.trails["poll"].append(f"{self.name}:out")

    def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
        self.trails["consume"].append(f"{self.name}:in")
        call_next(job)
        self.trails["consume"].append(f"{self.name}:out")


def test_the_first_middleware_is_the_outermost_in_every_phase(
    sqs: SQSClient, queue_url: str
) -> None:
    trails: dict[str, list[str]] = {"produce": [], "poll": [], "consume": []}
    group = group_with(
        sqs, queue_url, Recorder("outer", trails), Recorder("inner", trails)
    )

    def handler(payload: Payload) -> None:
        trails["consume"].append("handler")

    message_id = group.enqueue("jobs", "ping", {})
    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    nested = ["outer:in", "inner:in", "inner:out", "outer:out"]
    assert trails["produce"] == nested
    assert trails["poll"] == nested
    assert trails["consume"] == [
        "outer:in",
        "inner:in",
        "handler",
        "inner:out",
        "outer:out",
    ]
    assert visible_messages(sqs, queue_url) == []
    assert isinstance(message_id, str)


def test_the_produce_chain_returns_the_message_id_and_sends_once(
    sqs: SQSClient, queue_url: str
) -> None:
    seen: list[str] = []

    class Watch(JobMiddleware):
        def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
            message_id = call_next(job)
            seen.append(message_id)
            return message_id

    group = group_with(sqs, queue_url, Watch(), Watch())

    message_id = group.enqueue("jobs", "ping", {})

    assert seen == [message_id, message_id]
    assert message_count(sqs, queue_url) == 1


def test_a_middleware_may_implement_a_single_phase(
    sqs: SQSClient, queue_url: str
) -> None:
    consumed: list[str] = []

    class ConsumeOnly(JobMiddleware):
        def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
            consumed.append(job.job_type)
            call_next(job)

    handled: list[Payload] = []
    group = group_with(sqs, queue_url, ConsumeOnly())

    group.enqueue("jobs", "ping", {"n": 1})
    JobWorker(group, {"ping": handled.append}, stop_after(1), 0).run()

    assert consumed == ["ping"]
    assert handled == [{"n": 1}]
    assert message_count(sqs, queue_url) == 0


def test_a_produce_middleware_may_add_correlation_fields(
    sqs: SQSClient, queue_url: str
) -> None:
    class Tenant(JobMiddleware):
        def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
            job.correlation_fields["tenant"] = "acme"
            return call_next(job)

    group = group_with(sqs, queue_url, Tenant())

    group.enqueue("jobs", "ping", {}, correlation_fields={"request_id": "r-1"})

    (message,) = visible_messages(sqs, queue_url)
    fields = json.loads(
        message["MessageAttributes"]["correlation_fields"]["StringValue"]
    )
    assert fields == {"request_id": "r-1", "tenant": "acme"}


def test_a_poll_middleware_that_does_not_call_next_receives_nothing(
    sqs: SQSClient, queue_url: str
) -> None:
    cycles: list[None] = []

    class Paused(JobMiddleware):
        def poll(self, call_next: cabc.Callable[[], None]) -> None:
            cycles.append(None)

    handled: list[Payload] = []
    group = group_with(sqs, queue_url, Paused())
    group.enqueue("jobs", "ping", {})

    status = JobWorker(group, {"ping": handled.append}, stop_after(3), 0).run()

    assert status == 0
    assert len(cycles) == 3
    assert handled == []
    assert len(visible_messages(sqs, queue_url)) == 1


@pytest.mark.parametrize(
    ("error", "outcome", "left"),
    [(RuntimeError("nope"), "retry", 1), (NonRetryableError("nope"), "delete", 0)],
)
def test_an_exception_raised_in_consume_counts_like_a_handler_exception(
    sqs: SQSClient,
    queue_url: str,
    logs: list[EventDict],
    error: Exception,
    outcome: str,
    left: int,
) -> None:
    class Refuse(JobMiddleware):
        def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
            raise error

    handled: list[Payload] = []
    group = group_with(sqs, queue_url, Refuse())
    group.enqueue("jobs", "ping", {})

    JobWorker(group, {"ping": handled.append}, stop_after(1), 0).run()

    assert handled == []
    assert only_event(logs, "job_finished")["outcome"] == outcome
    assert len(visible_messages(sqs, queue_url)) == left


def test_consume_middleware_sees_the_received_job(
    sqs: SQSClient, queue_url: str
) -> None:
    jobs: list[Job] = []

    class Inject(JobMiddleware):
        injects_trace_headers = True

        def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
            job.trace_headers["traceparent"] = "00-trace-span-01"
            return call_next(job)

        def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
            jobs.append(job)
            call_next(job)

    group = group_with(sqs, queue_url, Inject())
    message_id = group.enqueue(
        "jobs", "ping", {"n": 1}, correlation_fields={"request_id": "r-1"}
    )

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    (job,) = jobs
    assert job.job_type == "ping"
    assert job.payload == {"n": 1}
    assert job.queue == "jobs"
    assert job.correlation_fields == {"request_id": "r-1"}
    assert job.trace_headers == {"traceparent": "00-trace-span-01"}
    assert job.message_id == message_id
    assert job.receive_count == 1


class TraceA(JobMiddleware):
    injects_trace_headers = True


class TraceB(JobMiddleware):
    injects_trace_headers = True


def test_two_trace_injecting_middleware_raise_at_enqueue(
    sqs: SQSClient, queue_url: str
) -> None:
    group = group_with(sqs, queue_url, TraceA(), JobMiddleware(), TraceB())

    with pytest.raises(ValueError, match="TraceA") as info:
        group.enqueue("jobs", "ping", {})

    assert "TraceB" in str(info.value)
    assert message_count(sqs, queue_url) == 0


def test_one_trace_injecting_middleware_is_fine(sqs: SQSClient, queue_url: str) -> None:
    group = group_with(sqs, queue_url, TraceA(), JobMiddleware())

    group.enqueue("jobs", "ping", {})

    assert message_count(sqs, queue_url) == 1


def test_with_one_slot_a_poll_middleware_wraps_the_job_its_cycle_received(
    sqs: SQSClient, queue_url: str
) -> None:
    """Per-cycle instrumentation: the job runs between the cycle's in and out,
    and sees what the poll middleware set in its context."""
    cycle_id: contextvars.ContextVar[int] = contextvars.ContextVar("cycle_id")
    trail: list[str] = []

    class PerCycle(JobMiddleware):
        def __init__(self) -> None:
            self.cycles = 0

        def poll(self, call_next: cabc.Callable[[], None]) -> None:
            self.cycles += 1
            token = cycle_id.set(self.cycles)
            trail.append(f"cycle {self.cycles}:in")
            try:
                call_next()
            finally:
                trail.append(f"cycle {self.cycles}:out")
                cycle_id.reset(token)

    def handler(payload: Payload) -> None:
        trail.append(f"job {payload['n']} in cycle {cycle_id.get(None)}")

    group = group_with(sqs, queue_url, PerCycle())
    for n in (1, 2):
        group.enqueue("jobs", "ping", {"n": n})

    status = JobWorker(group, {"ping": handler}, stop_after(2), 0).run()

    assert status == 0
    assert len(trail) == 6
    assert trail[0::3] == ["cycle 1:in", "cycle 2:in"]
    assert trail[2::3] == ["cycle 1:out", "cycle 2:out"]
    first, second = trail[1], trail[4]
    assert first.endswith("in cycle 1")
    assert second.endswith("in cycle 2")
    assert sorted([first.split()[1], second.split()[1]]) == ["1", "2"]
