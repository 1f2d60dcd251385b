"""enqueue_many through produce middleware: a bounded number of threads."""

from __future__ import annotations

import collections.abc as cabc
import json
import threading
import typing as t
import uuid

import pytest
from flask_sqs_jobs import EnqueueBatchError
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue

from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Threads enqueue_many may add to the process, whatever the batch's size.
MAX_EXTRA_THREADS = 16


class Recording(JobMiddleware):
    """Wraps produce; records each job's MessageId and the live thread count."""

    def __init__(self, fail_for: int | None = None) -> None:
        self.seen: dict[int, str] = {}
        self.thread_counts: list[int] = []
        self.fail_for = fail_for
        self.lock = threading.Lock()

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        n = t.cast(int, job.payload["n"])
        with self.lock:
            self.thread_counts.append(threading.active_count())
        if n == self.fail_for:
            raise ValueError(f"job {n} refused by the middleware")
        message_id = call_next(job)
        with self.lock:
            self.seen[n] = message_id
        return message_id


def group_for(client: SQSClient, url: str, middleware: JobMiddleware) -> QueueGroup:
    return QueueGroup(
        {"jobs": {"queue": SqsQueue(url, boto_client=client)}}, middleware=[middleware]
    )


def payloads_by_id(sqs: SQSClient, url: str) -> dict[str, int]:
    found: dict[str, int] = {}
    while messages := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60
    ).get("Messages", []):
        for m in messages:
            found[m["MessageId"]] = json.loads(m["Body"])["payload"]["n"]
    return found


def enqueue_threads() -> list[threading.Thread]:
    return [
        th
        for th in threading.enumerate()
        if th.name.startswith("sqs-jobs-enqueue-many")
    ]


class BatchRecorder:
    """Stands in for the SQS client: accepts every batch, keeps each body by id."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, t.Any]]] = []
        self.sent: dict[str, int] = {}

    def get_queue_attributes(self, **kwargs: t.Any) -> dict[str, t.Any]:
        return {"Attributes": {"MaximumMessageSize": "262144"}}

    def send_message_batch(self, **kwargs: t.Any) -> dict[str, t.Any]:
        entries: list[dict[str, t.Any]] = kwargs["Entries"]
        self.requests.append(entries)
        successful = []
        for entry in entries:
            message_id = str(uuid.uuid4())
            self.sent[message_id] = json.loads(entry["MessageBody"])["payload"]["n"]
            successful.append({"Id": entry["Id"], "MessageId": message_id})
        return {"Successful": successful, "Failed": []}


def test_a_large_batch_runs_on_a_bounded_number_of_threads() -> None:
    middleware = Recording()
    client = BatchRecorder()
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
    group = group_for(t.cast("SQSClient", client), url, middleware)
    before = threading.active_count()

    ids = group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(2000)])

    assert len(ids) == 2000
    assert max(middleware.thread_counts) - before <= MAX_EXTRA_THREADS
    assert middleware.seen == dict(enumerate(ids))
    assert client.sent == {ids[n]: n for n in range(2000)}
    assert [len(entries) for entries in client.requests] == [10] * 200
    assert enqueue_threads() == []


def test_a_thread_that_cannot_start_fails_the_batch_and_leaves_no_thread(
    sqs: SQSClient, queue_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    middleware = Recording()
    group = group_for(sqs, queue_url, middleware)
    start = threading.Thread.start
    started: list[threading.Thread] = []

    def start_three(self: threading.Thread) -> None:
        if len(started) == 3:
            raise RuntimeError("can't start new thread")
        started.append(self)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", start_three)

    with pytest.raises(EnqueueBatchError) as caught:
        group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(25)])

    error = caught.value
    assert error.enqueued == []
    assert [index for index, _, _ in error.failed] == list(range(25))
    _, code, message = error.failed[0]
    assert code == "RuntimeError"
    assert "could not start a thread" in message
    assert "can't start new thread" in message
    assert isinstance(error.__cause__, RuntimeError)
    assert str(error).startswith("25 of 25 jobs were not enqueued")
    assert message_count(sqs, queue_url) == 0
    assert len(started) == 3
    assert not any(th.is_alive() for th in started)
    assert middleware.seen == {}


def test_a_middleware_refusing_a_job_of_a_later_chunk_fails_only_that_job(
    sqs: SQSClient, queue_url: str
) -> None:
    middleware = Recording(fail_for=14)
    group = group_for(sqs, queue_url, middleware)

    with pytest.raises(EnqueueBatchError) as caught:
        group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(25)])

    error = caught.value
    assert [i for i, _ in error.enqueued] == [n for n in range(25) if n != 14]
    assert error.failed == [(14, "ValueError", "job 14 refused by the middleware")]
    assert payloads_by_id(sqs, queue_url) == {
        message_id: n for n, message_id in error.enqueued
    }


def test_a_middleware_refusing_a_job_of_the_first_chunk_sends_nothing(
    sqs: SQSClient, queue_url: str
) -> None:
    group = group_for(sqs, queue_url, Recording(fail_for=3))

    with pytest.raises(ValueError, match="job 3 refused"):
        group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(25)])

    assert message_count(sqs, queue_url) == 0
    assert enqueue_threads() == []


def test_a_job_too_large_in_a_later_chunk_is_found_before_anything_is_sent(
    sqs: SQSClient,
) -> None:
    url = create_queue(sqs, "small", MaximumMessageSize="1024")
    middleware = Recording()
    group = group_for(sqs, url, middleware)
    jobs = [
        ("ping", {"n": n, "blob": "x" * (2000 if n == 17 else 1)}) for n in range(25)
    ]

    with pytest.raises(ValueError, match=r"jobs\[17\]"):
        group.enqueue_many("jobs", jobs)

    assert message_count(sqs, url) == 0
    assert middleware.thread_counts == []
