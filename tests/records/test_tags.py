"""Tags at enqueue: checked, carried in the body, kept in the job's record, searched."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import work_off

from tests.engine.helpers import poll_until
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def queue_url(queue_urls: dict[str, str]) -> str:
    return queue_urls["default"]


def test_tags_travel_in_the_body_and_the_worker_records_them(
    store_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_url: str
) -> None:
    seen: list[tuple[str, ...]] = []

    @jobs.task()
    def charge(amount: int) -> None:
        seen.append(current_job.tags)

    enqueued = charge.options(tags=["customer:42", "vip", "vip"]).enqueue(amount=3)
    [message] = visible_messages(sqs, queue_url)
    assert json.loads(message["Body"])["tags"] == ["customer:42", "vip"]
    work_off(store_app)

    assert seen == [("customer:42", "vip")]
    record = jobs.get_job(enqueued.job_id)
    assert record is not None
    assert (record.status, sorted(record.tags)) == ("succeeded", ["customer:42", "vip"])
    assert [r.job_id for r in jobs.find_jobs(tag="vip")] == [enqueued.job_id]
    assert jobs.find_jobs(tag="vip", status="failed") == []


def test_a_job_without_tags_sends_no_tags_field(
    store_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_url: str
) -> None:
    jobs.enqueue("default", "plain", {"n": 1})
    [message] = visible_messages(sqs, queue_url)
    assert "tags" not in json.loads(message["Body"])
    assert [record.tags for record in jobs.find_jobs(job_type="plain")] == [()]


@pytest.mark.parametrize(
    ("tags", "error", "message"),
    [
        ("customer:42", TypeError, "tags must be a list of str"),
        ([42], TypeError, "tags must be str"),
        ([""], ValueError, "is empty"),
        (["x" * 65], ValueError, "longer than 64 characters"),
        (["bad\nline"], ValueError, "control"),
        ([f"t{n}" for n in range(11)], ValueError, "at most 10 tags"),
    ],
)
def test_wrong_tags_are_refused_and_nothing_is_sent(
    store_app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_url: str,
    tags: object,
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        jobs.enqueue("default", "plain", {}, tags=tags)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        jobs.enqueue_many("default", [{"job_type": "plain", "tags": tags}])
    assert message_count(sqs, queue_url) == 0


def test_tags_written_into_the_outbox_reach_the_record(
    store_app: Flask, jobs: SQSJobs
) -> None:
    store = jobs.store()
    session = store.session()  # type: ignore[attr-defined]
    job_id = jobs.enqueue("default", "plain", {}, tags=["from-outbox"], session=session)
    session.commit()
    session.close()
    # The row is sent, and its record written, from the sender's thread.
    assert poll_until(lambda: bool(jobs.find_jobs(tag="from-outbox")))
    [record] = jobs.find_jobs(tag="from-outbox")
    assert (record.job_id, record.tags) == (job_id, ("from-outbox",))
