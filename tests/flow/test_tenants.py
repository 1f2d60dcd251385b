"""``tenant=`` at enqueue: the MessageGroupId of SQS fair queues, on standard queues."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def sent_group_ids(spy: SpyClient) -> list[str | None]:
    return [
        call.get("MessageGroupId")
        for call in spy.calls_to("send_message")
        + [e for b in spy.calls_to("send_message_batch") for e in b["Entries"]]
    ]


def test_the_tenant_is_sent_as_the_message_group_id(sqs: SQSClient) -> None:
    url = create_queue(sqs, "fair")
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, url)

    group.enqueue("jobs", "report", {"n": 1}, tenant="acme")
    group.enqueue_many("jobs", [{"job_type": "report", "tenant": "globex"}])
    group.enqueue("jobs", "report", {"n": 2})

    assert sorted(map(str, sent_group_ids(spy))) == ["None", "acme", "globex"]
    assert message_count(sqs, url) == 3


def test_a_fifo_queue_refuses_a_tenant_naming_message_group_id(
    sqs: SQSClient,
) -> None:
    url = create_queue(sqs, "ordered.fifo", fifo=True)
    group = one_queue_group(sqs, url)

    with pytest.raises(ValueError, match="message_group_id") as raised:
        group.enqueue("jobs", "report", {}, tenant="acme", message_group_id="g")

    assert "standard queues" in str(raised.value)
    assert message_count(sqs, url) == 0


def test_a_tenant_and_another_group_id_are_refused(sqs: SQSClient) -> None:
    url = create_queue(sqs, "fair")
    group = one_queue_group(sqs, url)

    with pytest.raises(ValueError, match="not both"):
        group.enqueue("jobs", "report", {}, tenant="acme", message_group_id="other")
    with pytest.raises(TypeError, match="tenant"):
        group.enqueue("jobs", "report", {}, tenant=t.cast(t.Any, 7))

    assert message_count(sqs, url) == 0


def test_a_task_takes_a_tenant_through_enqueue_and_options(
    sqs: SQSClient, jobs: SQSJobs
) -> None:
    url = create_queue(sqs, "fair-app")
    spy = SpyClient(sqs)
    jobs = SQSJobs(boto_client=spy.client)

    @jobs.task
    def report(n: int) -> None:
        pass

    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "fair-app"}})
    jobs.init_app(app)
    with app.app_context():
        report.options(tenant="acme").enqueue(n=1)
        jobs.enqueue("default", "report", {"n": 2}, tenant="globex")

    assert sorted(map(str, sent_group_ids(spy))) == ["acme", "globex"]
    assert message_count(sqs, url) == 2
