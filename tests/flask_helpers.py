"""Helpers of the Flask-layer tests."""

from __future__ import annotations

import dataclasses
import json
import typing as t

from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@dataclasses.dataclass(frozen=True)
class SentJob:
    """A job as it sits on an SQS queue: the wire contract, decoded."""

    message_id: str
    job_type: str
    payload: dict[str, t.Any]
    correlation_fields: dict[str, t.Any]


def sent_jobs(client: SQSClient, url: str) -> list[SentJob]:
    """The jobs visible on the queue at ``url`` (left there for others)."""
    jobs = []
    for message in visible_messages(client, url):
        body = json.loads(message["Body"])
        attribute = message.get("MessageAttributes", {}).get("correlation_fields")
        fields = json.loads(attribute["StringValue"]) if attribute else {}
        jobs.append(
            SentJob(message["MessageId"], body["job_type"], body["payload"], fields)
        )
    return jobs


def only_sent_job(client: SQSClient, url: str) -> SentJob:
    """The one job on the queue at ``url``; fails when there are more or none."""
    jobs = sent_jobs(client, url)
    assert len(jobs) == 1, jobs
    return jobs[0]
