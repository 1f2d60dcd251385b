"""The heartbeat: every message the worker holds stays invisible to other consumers."""

from __future__ import annotations

import threading
import time
import typing as t

from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

BODY = '{"job_type":"%s","payload":{}}'


def hidden_throughout(sqs: SQSClient, url: str, seconds: float) -> list[str]:
    """Watch the queue for ``seconds``; return every moment a message was visible."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        counts = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )["Attributes"]
        if counts != {
            "ApproximateNumberOfMessages": "0",
            "ApproximateNumberOfMessagesNotVisible": "1",
        }:
            seen.append(f"{deadline - time.monotonic():.2f}s left: {counts}")
        time.sleep(0.1)
    return seen


def test_a_running_jobs_message_stays_invisible_past_its_visibility_timeout(
    sqs: SQSClient, queue_url: str
) -> None:
    started = threading.Event()
    finish = threading.Event()
    runs: list[None] = []

    def long_job(payload: Payload) -> None:
        runs.append(None)
        started.set()
        finish.wait(WAIT)

    group = one_queue_group(sqs, queue_url, visibility_timeout=1)
    group.enqueue("jobs", "long", {})
    thread = WorkerThread(JobWorker(group, {"long": long_job}, stop_after(1), 0))
    try:
        assert started.wait(WAIT)
        # Three times the visibility timeout.
        assert hidden_throughout(sqs, queue_url, 3.0) == []
    finally:
        finish.set()

    assert thread.join() == 0
    assert len(runs) == 1
    assert message_count(sqs, queue_url) == 0


def test_a_message_waiting_for_a_free_slot_stays_invisible(sqs: SQSClient) -> None:
    """Two long polls return a message each while one slot is free."""
    first_url = create_queue(sqs, "first")
    waiting_url = create_queue(sqs, "waiting")
    spy = SpyClient(sqs)
    lock = threading.Lock()
    long_polls = {first_url: 0, waiting_url: 0}
    both_long_polling = threading.Event()
    waiting_received = threading.Event()

    def before(call: dict[str, t.Any]) -> None:
        if call.get("WaitTimeSeconds", 0) > 0:
            with lock:
                long_polls[call["QueueUrl"]] += 1
                if all(long_polls.values()):
                    both_long_polling.set()

    def after(call: dict[str, t.Any], response: t.Any) -> None:
        if call["QueueUrl"] == waiting_url and (response or {}).get("Messages"):
            waiting_received.set()

    spy.before["receive_message"] = before
    spy.after["receive_message"] = after
    group = QueueGroup(
        {
            "first": {"queue": SqsQueue(first_url, boto_client=spy.client)},
            "waiting": {
                "queue": SqsQueue(
                    waiting_url, boto_client=spy.client, visibility_timeout=1
                )
            },
        }
    )
    first_started = threading.Event()
    release_first = threading.Event()
    handled: list[str] = []

    def first(payload: Payload) -> None:
        first_started.set()
        release_first.wait(WAIT)
        handled.append("first")

    def waiting(payload: Payload) -> None:
        handled.append("waiting")
        worker.request_stop()

    worker = JobWorker(
        group, {"first": first, "waiting": waiting}, idle_wait_seconds=10
    )
    thread = WorkerThread(worker)
    try:
        assert both_long_polling.wait(WAIT)
        sqs.send_message(QueueUrl=first_url, MessageBody=BODY % "first")
        assert first_started.wait(WAIT)
        sqs.send_message(QueueUrl=waiting_url, MessageBody=BODY % "waiting")
        assert waiting_received.wait(WAIT)

        assert hidden_throughout(sqs, waiting_url, 3.0) == []
    finally:
        release_first.set()

    assert thread.join() == 0
    assert handled == ["first", "waiting"]
    assert message_count(sqs, first_url) == 0
    assert message_count(sqs, waiting_url) == 0


def test_a_visibility_timeout_of_zero_means_no_heartbeat(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url, visibility_timeout=0)
    group.enqueue("jobs", "job", {})

    def job(payload: Payload) -> None:
        threading.Event().wait(0.3)  # a job that takes a little while

    JobWorker(group, {"job": job}, stop_after(1), 0).run()

    assert visibility_changes(spy) == []
    receives = spy.calls_to("receive_message")
    assert receives
    assert all(call["VisibilityTimeout"] == 0 for call in receives)
    assert message_count(sqs, queue_url) == 0


def test_without_a_visibility_timeout_the_queues_own_is_read_and_extended(
    sqs: SQSClient,
) -> None:
    url = create_queue(sqs, "slow", visibility_timeout=3)
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, url)
    group.enqueue("jobs", "job", {})

    def job(payload: Payload) -> None:
        assert poll_until(lambda: bool(visibility_changes(spy)))

    JobWorker(group, {"job": job}, stop_after(1), 0).run()

    assert set(visibility_changes(spy)) == {3}
    assert {
        call.get("VisibilityTimeout") for call in spy.calls_to("receive_message")
    } == {3}
    assert message_count(sqs, url) == 0
