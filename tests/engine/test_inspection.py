"""What operators ask of an :class:`SqsQueue`: counts, its DLQ, peeking."""

from __future__ import annotations

import json
import typing as t

from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.ops._inspection import counts
from flask_sqs_jobs.engine.ops._inspection import dead_letter_queue
from flask_sqs_jobs.engine.ops._inspection import peek
from flask_sqs_jobs.engine.ops._inspection import QueueCounts

from tests.support import create_queue
from tests.support import queue_counts

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def test_counts_are_read_again_on_each_call(sqs: SQSClient, queue_url: str) -> None:
    queue = SqsQueue(queue_url, boto_client=sqs)
    before = counts(queue)
    sqs.send_message(QueueUrl=queue_url, MessageBody="{}")
    sqs.send_message(QueueUrl=queue_url, MessageBody="{}", DelaySeconds=60)

    assert before == QueueCounts(visible=0, in_flight=0, delayed=0)
    assert counts(queue) == QueueCounts(visible=1, in_flight=0, delayed=1)
    assert counts(queue).total == 2


def test_the_dead_letter_queue_follows_a_policy_changed_after_the_worker_read_it(
    sqs: SQSClient,
) -> None:
    first = create_queue(sqs, "jobs-dlq")
    second = create_queue(sqs, "jobs-other-dlq")
    url = create_queue(sqs, "jobs", dead_letter_url=first)
    queue = SqsQueue(url, boto_client=sqs)
    assert queue.dead_letter_url() == first  # what a worker resolved and keeps
    arn = sqs.get_queue_attributes(QueueUrl=second, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    policy = {"deadLetterTargetArn": arn, "maxReceiveCount": "3"}
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(policy)}
    )

    dlq = dead_letter_queue(queue)

    assert dlq is not None
    assert (dlq.url, dlq.name) == (second, "jobs-other-dlq")


def test_a_queue_without_redrive_policy_has_no_dead_letter_queue(
    sqs: SQSClient, queue_url: str
) -> None:
    assert dead_letter_queue(SqsQueue(queue_url, boto_client=sqs)) is None


def test_peek_returns_distinct_messages_and_leaves_them_visible(
    sqs: SQSClient, queue_url: str
) -> None:
    sent = {
        sqs.send_message(QueueUrl=queue_url, MessageBody=f'{{"n": {n}}}')["MessageId"]
        for n in range(12)
    }
    queue = SqsQueue(queue_url, boto_client=sqs)

    everything = peek(queue)
    some = peek(queue, 3)

    assert {m["MessageId"] for m in everything} == sent
    assert len(everything) == 12
    assert len({m["MessageId"] for m in some}) == 3
    assert queue_counts(sqs, queue_url) == (12, 0, 0)
