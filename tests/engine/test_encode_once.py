"""A payload is serialised once per enqueue, through middleware that keeps it."""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

import pytest
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.producing import _checks
from flask_sqs_jobs.engine.sqs import dump_json

from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Tracing(JobMiddleware):
    """Adds a header, as a tracing vendor's middleware does; leaves the payload."""

    keeps_payload = True

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        job.correlation_fields = {**job.correlation_fields, "trace": "t-1"}
        return call_next(job)


class Rewriting(JobMiddleware):
    """Changes the payload: the job must be checked and encoded again."""

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        job.payload = {**job.payload, "rewritten": True}
        return call_next(job)


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every value the produce checks serialise."""
    seen: list[object] = []

    def counting(value: object) -> str:
        seen.append(value)
        return dump_json(value)

    monkeypatch.setattr(_checks, "dump_json", counting)
    return seen


def _group(sqs: SQSClient, url: str, *middleware: JobMiddleware) -> QueueGroup:
    queue = SqsQueue(url, boto_client=sqs)
    return QueueGroup({"jobs": {"queue": queue}}, middleware=middleware)


def _payloads(encodings: list[object]) -> list[object]:
    return [value for value in encodings if isinstance(value, dict) and "n" in value]


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_middleware_that_keeps_the_payload_costs_no_second_encoding(
    sqs: SQSClient, queue_url: str, encodings: list[object], many: bool
) -> None:
    group = _group(sqs, queue_url, Tracing())
    if many:
        group.enqueue_many("jobs", [("work", {"n": n}) for n in range(3)])
    else:
        group.enqueue("jobs", "work", {"n": 0})
    count = 3 if many else 1
    assert len(_payloads(encodings)) == count  # once each, at the checks
    messages = visible_messages(sqs, queue_url)
    bodies = [json.loads(m["Body"]) for m in messages]
    assert sorted(b["payload"]["n"] for b in bodies) == list(range(count))
    fields = [m["MessageAttributes"]["correlation_fields"] for m in messages]
    assert {json.loads(f["StringValue"])["trace"] for f in fields} == {"t-1"}


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_middleware_that_may_change_the_payload_is_encoded_again(
    sqs: SQSClient, queue_url: str, encodings: list[object], many: bool
) -> None:
    group = _group(sqs, queue_url, Rewriting())
    if many:
        group.enqueue_many("jobs", [("work", {"n": n}) for n in range(3)])
    else:
        group.enqueue("jobs", "work", {"n": 0})
    count = 3 if many else 1
    assert len(_payloads(encodings)) == 2 * count  # at the checks, after the chain
    bodies = [json.loads(m["Body"]) for m in visible_messages(sqs, queue_url)]
    assert [b["payload"]["rewritten"] for b in bodies] == [True] * count


def test_the_vendor_middlewares_declare_that_they_keep_the_payload() -> None:
    from flask_sqs_jobs.contrib.newrelic import NewRelicMiddleware
    from flask_sqs_jobs.contrib.otel import OTelMiddleware
    from flask_sqs_jobs.contrib.sentry import SentryMiddleware

    assert OTelMiddleware.keeps_payload
    assert NewRelicMiddleware.keeps_payload
    assert SentryMiddleware.keeps_payload
    assert not JobMiddleware.keeps_payload
