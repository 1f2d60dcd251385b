"""One trace-injecting middleware per process, across queue groups and apps."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.contrib.otel import OTelMiddleware
from flask_sqs_jobs.contrib.sentry import SentryMiddleware

from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class VendorA(JobMiddleware):
    injects_trace_headers = True


class VendorB(JobMiddleware):
    injects_trace_headers = True


class VendorASubclass(VendorA):
    pass


def group_with(sqs: SQSClient, url: str, *middleware: JobMiddleware) -> QueueGroup:
    queue = SqsQueue(url, boto_client=sqs)
    return QueueGroup({"jobs": {"queue": queue}}, middleware=middleware)


def test_a_second_vendor_in_another_group_raises_at_enqueue_naming_both(
    sqs: SQSClient, queue_url: str
) -> None:
    first = group_with(sqs, queue_url, VendorA())
    second = group_with(sqs, queue_url, VendorB())
    first.enqueue("jobs", "ping", {})

    with pytest.raises(ValueError, match="per process") as info:
        second.enqueue("jobs", "ping", {})

    assert "VendorA is already in use" in str(info.value)
    assert "VendorB" in str(info.value)
    assert message_count(sqs, queue_url) == 1


def test_enqueue_many_obeys_the_same_rule(sqs: SQSClient, queue_url: str) -> None:
    group_with(sqs, queue_url, VendorA()).enqueue("jobs", "ping", {})

    with pytest.raises(ValueError, match="VendorB"):
        group_with(sqs, queue_url, VendorB()).enqueue_many("jobs", [("ping", {})])

    assert message_count(sqs, queue_url) == 1


def test_the_same_vendor_in_many_groups_is_fine(sqs: SQSClient, queue_url: str) -> None:
    shared = VendorA()
    for middleware in (shared, shared, VendorA(), VendorASubclass(), VendorA()):
        group_with(sqs, queue_url, middleware, JobMiddleware()).enqueue(
            "jobs", "ping", {}
        )
    group_with(sqs, queue_url, JobMiddleware()).enqueue("jobs", "ping", {})

    assert message_count(sqs, queue_url) == 6


def make_app(
    sqs: SQSClient, url: str, middleware: JobMiddleware, *, eager: bool = False
) -> tuple[Flask, SQSJobs]:
    app = Flask(__name__)
    app.config.update(
        TESTING=True, SQS_JOBS_QUEUES={"default": {"url": url}}, SQS_JOBS_EAGER=eager
    )
    return app, SQSJobs(app, boto_client=sqs, middleware=[middleware])


def test_two_apps_with_different_tracing_vendors_fail_at_the_second_enqueue(
    sqs: SQSClient,
) -> None:
    url = create_queue(sqs, "two-apps")
    sentry_app, sentry_jobs = make_app(sqs, url, SentryMiddleware())
    otel_app, otel_jobs = make_app(sqs, url, OTelMiddleware())
    with sentry_app.app_context():
        sentry_jobs.enqueue("default", "ping", {})

    with otel_app.app_context(), pytest.raises(ValueError, match="per process") as info:
        otel_jobs.enqueue("default", "ping", {})

    message = str(info.value)
    assert "flask_sqs_jobs.contrib.sentry.SentryMiddleware is already in use" in message
    assert "flask_sqs_jobs.contrib.otel.OTelMiddleware" in message
    assert message_count(sqs, url) == 1


def test_eager_mode_obeys_the_same_rule(sqs: SQSClient) -> None:
    url = create_queue(sqs, "eager")
    group_with(sqs, url, VendorA()).enqueue("jobs", "ping", {})
    app, jobs = make_app(sqs, url, VendorB(), eager=True)
    ran: list[object] = []
    jobs.handler("ping")(ran.append)

    with app.app_context(), pytest.raises(ValueError, match="VendorB"):
        jobs.enqueue("default", "ping", {})

    assert ran == []


def test_after_reset_tracing_another_vendor_may_enqueue(sqs: SQSClient) -> None:
    from flask_sqs_jobs.testing import reset_tracing

    url = create_queue(sqs, "tracing-reset")
    group_with(sqs, url, VendorA()).enqueue("jobs", "noop")
    with pytest.raises(ValueError, match="already in use"):
        group_with(sqs, url, VendorB()).enqueue("jobs", "noop")

    reset_tracing()

    group_with(sqs, url, VendorB()).enqueue("jobs", "noop")
    assert message_count(sqs, url) == 2
