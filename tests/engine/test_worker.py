"""JobWorker: cycles, concurrency, stopping and receive failures."""

from __future__ import annotations

import collections.abc as cabc
import json
import random
import threading
import typing as t

import pytest
from botocore.exceptions import ClientError
from botocore.exceptions import EndpointConnectionError
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.worker import _receive_health

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

MISSING_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/does-not-exist"


def queue_counts(sqs: SQSClient, url: str) -> tuple[int, int]:
    """(visible, in flight) messages on the queue."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def body(source: str) -> str:
    return json.dumps({"job_type": "work", "payload": {"from": source}})


def fill(group: QueueGroup, count: int, queue: str = "jobs") -> None:
    for n in range(count):
        group.enqueue(queue, "work", {"n": n})


class TestCycles:
    def test_with_concurrency_1_each_cycle_processes_at_most_one_message(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        handled: list[Payload] = []
        group = one_queue_group(sqs, queue_url)
        fill(group, 5)

        status = JobWorker(group, {"work": handled.append}, stop_after(3), 0).run()

        assert status == 0
        assert len(handled) == 3
        assert message_count(sqs, queue_url) == 2
        assert len(visible_messages(sqs, queue_url)) == 2

    def test_should_stop_is_asked_before_each_cycle(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        trail: list[str] = []

        class Cycles(JobMiddleware):
            def poll(self, call_next: cabc.Callable[[], None]) -> None:
                trail.append("cycle")
                call_next()

        def should_stop() -> bool:
            trail.append("asked")
            return trail.count("asked") > 2

        group = QueueGroup(
            {"jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)}},
            middleware=[Cycles()],
        )

        JobWorker(group, {"work": lambda p: None}, should_stop, 0).run()

        assert trail == ["asked", "cycle", "asked", "cycle", "asked"]

    def test_a_worker_told_to_stop_at_once_processes_nothing(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        handled: list[Payload] = []
        group = one_queue_group(sqs, queue_url)
        fill(group, 1)

        status = JobWorker(group, {"work": handled.append}, lambda: True, 0).run()

        assert status == 0
        assert handled == []
        assert len(visible_messages(sqs, queue_url)) == 1


class TestConcurrency:
    def test_up_to_n_jobs_run_at_the_same_time(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        all_running = threading.Barrier(3, timeout=WAIT)
        finished: list[int] = []

        def work(payload: Payload) -> None:
            all_running.wait()
            finished.append(payload["n"])

        group = one_queue_group(sqs, queue_url)
        fill(group, 3)
        worker = JobWorker(
            group,
            {"work": work},
            should_stop=lambda: len(finished) == 3,
            idle_wait_seconds=0,
            concurrency=3,
        )

        status = WorkerThread(worker).join()

        assert status == 0
        assert sorted(finished) == [0, 1, 2]
        assert message_count(sqs, queue_url) == 0

    def test_the_worker_never_holds_more_messages_than_free_slots(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        release = threading.Event()
        started: list[int] = []
        finished: list[int] = []

        def work(payload: Payload) -> None:
            started.append(payload["n"])
            release.wait(WAIT)
            finished.append(payload["n"])

        group = one_queue_group(sqs, queue_url, visibility_timeout=30)
        fill(group, 5)
        worker = JobWorker(
            group,
            {"work": work},
            should_stop=lambda: len(finished) == 5,
            idle_wait_seconds=0,
            concurrency=2,
        )
        thread = WorkerThread(worker)
        try:
            assert poll_until(lambda: len(started) == 2)
            assert queue_counts(sqs, queue_url) == (3, 2)
            assert len(started) == 2
        finally:
            release.set()

        assert thread.join() == 0
        assert sorted(finished) == [0, 1, 2, 3, 4]
        assert message_count(sqs, queue_url) == 0

    @pytest.mark.parametrize(
        ("argument", "value"),
        [
            ("concurrency", 0),
            ("concurrency", -1),
            ("concurrency", 1.5),
            ("concurrency", True),
            ("idle_wait_seconds", -1),
            ("idle_wait_seconds", 21),
            ("idle_wait_seconds", 0.5),
            ("idle_wait_seconds", None),
        ],
    )
    def test_invalid_settings_raise_a_value_error_naming_them(
        self, sqs: SQSClient, queue_url: str, argument: str, value: t.Any
    ) -> None:
        group = one_queue_group(sqs, queue_url)

        with pytest.raises(ValueError, match=argument):
            JobWorker(group, {}, **{argument: value})

    def test_queues_must_be_a_queue_group(self) -> None:
        with pytest.raises(TypeError, match="QueueGroup"):
            JobWorker(t.cast(t.Any, {"jobs": "url"}), {})


class TestStopping:
    def test_request_stop_lets_the_running_job_finish(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        started = threading.Event()
        proceed = threading.Event()
        finished: list[int] = []

        def work(payload: Payload) -> None:
            started.set()
            proceed.wait(WAIT)
            finished.append(payload["n"])

        group = one_queue_group(sqs, queue_url)
        fill(group, 2)
        worker = JobWorker(group, {"work": work}, idle_wait_seconds=0)
        thread = WorkerThread(worker)
        assert started.wait(WAIT)

        worker.request_stop()
        proceed.set()

        assert thread.join() == 0
        assert len(finished) == 1
        assert message_count(sqs, queue_url) == 1
        assert len(visible_messages(sqs, queue_url)) == 1

    def test_messages_received_after_the_stop_request_are_made_visible_again(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        """A long poll in flight at the stop returns a message: it is released."""
        spy = SpyClient(sqs)
        long_polling = threading.Event()
        received: list[str] = []

        def before(call: dict[str, t.Any]) -> None:
            if call.get("WaitTimeSeconds", 0) > 0:
                long_polling.set()

        def after(call: dict[str, t.Any], response: t.Any) -> None:
            if response is not None:
                received.extend(m["MessageId"] for m in response.get("Messages", []))

        spy.before["receive_message"] = before
        spy.after["receive_message"] = after
        handled: list[Payload] = []
        group = one_queue_group(spy.client, queue_url, visibility_timeout=30)
        worker = JobWorker(group, {"work": handled.append}, idle_wait_seconds=5)
        thread = WorkerThread(worker)
        assert long_polling.wait(WAIT)

        worker.request_stop()
        message_id = sqs.send_message(
            QueueUrl=queue_url, MessageBody='{"job_type":"work","payload":{}}'
        )["MessageId"]

        assert thread.join() == 0
        assert message_id in received
        assert handled == []
        assert [m["MessageId"] for m in visible_messages(sqs, queue_url)] == [
            message_id
        ]


class TestReceiveFailures:
    def test_a_failing_queue_is_backed_off_while_a_healthy_one_is_served(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        handled: list[Payload] = []
        group = QueueGroup(
            {
                "broken": {
                    "queue": SqsQueue(MISSING_URL, boto_client=sqs),
                    "weight": 5,
                },
                "jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)},
            }
        )
        fill(group, 3)

        status = JobWorker(group, {"work": handled.append}, stop_after(40), 0).run()

        assert status == 0
        assert len(handled) == 3
        failures = [e for e in events(logs, "receive_failed") if e["queue"] == "broken"]
        # Backoff starts at 0.5-1 s and doubles: 40 quick cycles see few attempts.
        assert 1 <= len(failures) <= 3
        assert failures[0]["attempt"] == 1
        assert failures[0]["retry_in_seconds"] > 0
        assert all(e["queue"] == "broken" for e in events(logs, "receive_failed"))

    def test_the_worker_exits_1_when_every_queue_keeps_failing(
        self, sqs: SQSClient, logs: list[EventDict], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_receive_health, "MAX_RECEIVE_BACKOFF", 0.001)
        group = QueueGroup(
            {
                "a": {"queue": SqsQueue(MISSING_URL, boto_client=sqs)},
                "b": {"queue": SqsQueue(MISSING_URL + "-too", boto_client=sqs)},
            }
        )

        status = JobWorker(group, {"work": lambda p: None}, stop_after(500), 0).run()

        assert status == 1
        for name in ("a", "b"):
            attempts = [
                e["attempt"]
                for e in events(logs, "receive_failed")
                if e["queue"] == name
            ]
            # Consecutive attempts; one queue may pass 10 before the other gets there.
            assert attempts == list(range(1, len(attempts) + 1))
            assert len(attempts) >= 10
        assert only_event(logs, "worker_stopped")["reason"] == "receive_failures"

    def test_one_queue_failing_for_good_does_not_stop_the_worker(
        self,
        sqs: SQSClient,
        queue_url: str,
        logs: list[EventDict],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setattr(_receive_health, "MAX_RECEIVE_BACKOFF", 0.0)
        handled: list[Payload] = []
        group = QueueGroup(
            {
                "broken": {"queue": SqsQueue(MISSING_URL, boto_client=sqs)},
                "jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)},
            }
        )
        fill(group, 2)

        status = JobWorker(group, {"work": handled.append}, stop_after(30), 0).run()

        assert status == 0
        assert len(handled) == 2
        assert max(e["attempt"] for e in events(logs, "receive_failed")) >= 10

    def test_a_queue_that_recovers_is_served_again(
        self, sqs: SQSClient, queue_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_receive_health, "MAX_RECEIVE_BACKOFF", 0.0)
        spy = SpyClient(sqs)
        spy.failing["receive_message"] = "AWS.SimpleQueueService.NonExistentQueue"
        handled: list[Payload] = []
        group = one_queue_group(spy.client, queue_url)
        fill(group, 1)
        cycles = 0

        def should_stop() -> bool:
            """Let the first 8 cycles fail, then let SQS answer again."""
            nonlocal cycles
            cycles += 1
            if cycles == 9:
                del spy.failing["receive_message"]
            return bool(handled) or cycles > 500

        status = JobWorker(group, {"work": handled.append}, should_stop, 0).run()

        assert status == 0
        assert handled == [{"n": 0}]

    @pytest.mark.parametrize("concurrency", [1, 4])
    @pytest.mark.parametrize(
        ("failure", "brought_forward"),
        [
            (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
            (ClientError({"Error": {"Code": "InternalError"}}, "Receive"), False),
        ],
    )
    def test_a_queue_that_could_not_connect_is_retried_when_another_gets_through(
        self,
        sqs: SQSClient,
        logs: list[EventDict],
        monkeypatch: pytest.MonkeyPatch,
        concurrency: int,
        failure: Exception,
        brought_forward: bool,
    ) -> None:
        # Every backoff is a minute: only a retry brought forward runs in time.
        monkeypatch.setattr(random, "uniform", lambda a, b: 60.0)
        urls = {name: create_queue(sqs, f"reach-{name}") for name in ("a", "b")}
        spy = SpyClient(sqs)
        failed_once = threading.Event()

        def fail_a_once(call: dict[str, t.Any]) -> None:
            if call["QueueUrl"] == urls["a"] and not failed_once.is_set():
                failed_once.set()
                # Only now does b get a message: its receive follows a's failure.
                sqs.send_message(QueueUrl=urls["b"], MessageBody=body("b"))
                raise failure

        spy.before["receive_message"] = fail_a_once
        sqs.send_message(QueueUrl=urls["a"], MessageBody=body("a"))
        handled: list[Payload] = []
        group = QueueGroup(
            {
                name: {"queue": SqsQueue(url, boto_client=spy.client), "weight": w}
                for (name, url), w in zip(urls.items(), (1000, 1), strict=True)
            }
        )
        worker = JobWorker(
            group,
            {"work": handled.append},
            idle_wait_seconds=0,
            concurrency=concurrency,
        )
        thread = WorkerThread(worker)
        try:
            if brought_forward:
                assert poll_until(lambda: len(handled) == 2)
                brought = only_event(logs, "receive_retry_brought_forward")
                assert brought["queue"] == "a"
            else:
                assert poll_until(lambda: handled == [{"from": "b"}])
                assert worker.queue_failures()["a"] == 1
                assert events(logs, "receive_retry_brought_forward") == []
        finally:
            worker.request_stop()
        assert thread.join() == 0

    @pytest.mark.parametrize("idle_wait_seconds", [0, 5])
    def test_a_backoff_wait_ends_at_once_on_a_stop_request(
        self,
        sqs: SQSClient,
        queue_url: str,
        logs: list[EventDict],
        monkeypatch: pytest.MonkeyPatch,
        idle_wait_seconds: int,
    ) -> None:
        # Make the first (jittered) backoff a minute long.
        monkeypatch.setattr(random, "uniform", lambda a, b: 60.0)
        spy = SpyClient(sqs)
        spy.failing["receive_message"] = "InternalError"
        failed = threading.Event()
        spy.after["receive_message"] = lambda call, response: failed.set()
        worker = JobWorker(
            one_queue_group(spy.client, queue_url),
            {"work": lambda p: None},
            idle_wait_seconds=idle_wait_seconds,
        )
        thread = WorkerThread(worker)
        assert failed.wait(WAIT)
        assert poll_until(lambda: bool(events(logs, "receive_failed")))

        worker.request_stop()

        assert thread.join() == 0
        assert only_event(logs, "receive_failed")["retry_in_seconds"] == 60
        assert len(spy.calls_to("receive_message")) == 1


class TestIdlePolling:
    def test_while_idle_a_message_on_any_queue_is_picked_up_by_a_long_poll(
        self, sqs: SQSClient
    ) -> None:
        urls = {name: create_queue(sqs, name) for name in ("high", "mid", "low")}
        spy = SpyClient(sqs)
        lock = threading.Lock()
        in_flight: dict[str, int] = dict.fromkeys(urls.values(), 0)
        all_long_polling = threading.Event()
        long_polled: list[str] = []

        def before(call: dict[str, t.Any]) -> None:
            if call.get("WaitTimeSeconds", 0) > 0:
                with lock:
                    in_flight[call["QueueUrl"]] += 1
                    if all(in_flight.values()):
                        all_long_polling.set()

        def after(call: dict[str, t.Any], response: t.Any) -> None:
            if call.get("WaitTimeSeconds", 0) > 0:
                with lock:
                    in_flight[call["QueueUrl"]] -= 1
                for message in (response or {}).get("Messages", []):
                    long_polled.append(message["MessageId"])

        spy.before["receive_message"] = before
        spy.after["receive_message"] = after
        group = QueueGroup.build(
            boto_client=spy.client,
            queues={
                "high": {"url": urls["high"], "weight": 10},
                "mid": {"url": urls["mid"], "weight": 3},
                "low": {"url": urls["low"]},
            },
        )
        handled = threading.Event()
        worker = JobWorker(
            group, {"work": lambda p: handled.set()}, idle_wait_seconds=1
        )
        thread = WorkerThread(worker)
        try:
            assert all_long_polling.wait(WAIT)
            message_id = sqs.send_message(
                QueueUrl=urls["low"], MessageBody='{"job_type":"work","payload":{}}'
            )["MessageId"]
            assert handled.wait(WAIT)
        finally:
            worker.request_stop()

        assert thread.join() == 0
        assert message_id in long_polled
        assert message_count(sqs, urls["low"]) == 0


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1.0])
def test_a_shutdown_timeout_that_is_not_a_finite_duration_is_refused(
    sqs: SQSClient, queue_url: str, timeout: float
) -> None:
    group = QueueGroup({"jobs": {"queue": SqsQueue(queue_url, boto_client=sqs)}})

    with pytest.raises(ValueError, match="shutdown_timeout must be a finite number"):
        JobWorker(group, {"ping": print}, shutdown_timeout=timeout)
