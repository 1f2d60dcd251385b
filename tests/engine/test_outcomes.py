"""SPEC's outcome table, one row at a time, driven through JobWorker.run()."""

from __future__ import annotations

import datetime as dt
import json
import time
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs.engine import JobHandler

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Handlers: t.TypeAlias = dict[str, t.Any]


def run_once(
    client: SQSClient, url: str, handlers: Handlers, cycles: int = 1, **options: t.Any
) -> int:
    """Run a worker over the ``jobs`` queue for ``cycles`` polling cycles."""
    group = one_queue_group(client, url, **options)
    return JobWorker(group, handlers, stop_after(cycles), idle_wait_seconds=0).run()


def deletes(spy: SpyClient) -> int:
    return len(spy.calls_to("delete_message")) + len(
        spy.calls_to("delete_message_batch")
    )


def fail(payload: Payload) -> None:
    raise RuntimeError("temporary failure")


def succeed(payload: Payload) -> None:
    pass


def test_a_handler_that_returns_deletes_the_message(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    handled: list[Payload] = []
    one_queue_group(sqs, queue_url).enqueue("jobs", "ping", {"n": 1})

    status = run_once(sqs, queue_url, {"ping": handled.append})

    assert status == 0
    assert handled == [{"n": 1}]
    assert message_count(sqs, queue_url) == 0
    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == "success"
    assert finished["log_level"] == "info"


def test_a_message_from_another_producer_runs_and_extra_keys_are_ignored(
    sqs: SQSClient, queue_url: str
) -> None:
    """The wire format written by hand, as another language would."""
    seen: list[tuple[Payload, dict[str, t.Any], dict[str, str]]] = []
    body = {"job_type": "ping", "payload": {"n": 1}, "version": 3, "meta": [1]}
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=json.dumps(body),
        MessageAttributes={
            "correlation_fields": {
                "DataType": "String",
                "StringValue": '{"request_id": "r-9"}',
            },
            "traceparent": {"DataType": "String", "StringValue": "00-a-b-01"},
        },
    )

    def handler(payload: Payload) -> None:
        seen.append(
            (payload, current_job.correlation_fields, current_job.trace_headers)
        )

    run_once(sqs, queue_url, {"ping": handler})

    assert seen == [({"n": 1}, {"request_id": "r-9"}, {"traceparent": "00-a-b-01"})]
    assert message_count(sqs, queue_url) == 0


def test_a_handler_that_raises_leaves_the_message_for_redelivery(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    one_queue_group(sqs, queue_url).enqueue("jobs", "flaky", {})

    status = run_once(sqs, queue_url, {"flaky": fail}, visibility_timeout=0)

    assert status == 0
    assert len(visible_messages(sqs, queue_url)) == 1
    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == "retry"
    assert finished["error_type"] == "RuntimeError"
    assert finished["log_level"] == "warning"


def test_a_failed_job_is_delivered_again_and_can_then_succeed(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    receive_counts: list[int] = []

    def flaky(payload: Payload) -> None:
        receive_counts.append(current_job.receive_count or 0)
        if len(receive_counts) == 1:
            raise RuntimeError("first attempt fails")

    one_queue_group(sqs, queue_url).enqueue("jobs", "flaky", {})

    run_once(sqs, queue_url, {"flaky": flaky}, cycles=2, visibility_timeout=0)

    assert receive_counts == [1, 2]
    assert message_count(sqs, queue_url) == 0
    assert [e["outcome"] for e in events(logs, "job_finished")] == ["retry", "success"]


def test_a_non_retryable_error_deletes_the_message_at_once(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    one_queue_group(sqs, queue_url).enqueue("jobs", "give_up", {})

    run_once(sqs, queue_url, {"give_up": give_up}, visibility_timeout=0)

    assert message_count(sqs, queue_url) == 0
    assert only_event(logs, "job_finished")["outcome"] == "delete"


NESTED = "[" * 100_000 + "]" * 100_000
NESTED_PAYLOAD = (
    '{"job_type":"ping","payload":' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "}"
)
HUGE = '{"job_type":1,"payload":{"x":"' + "y" * 1_000_000 + '"}}'
MALFORMED = [
    pytest.param("not json at all", id="not JSON"),
    pytest.param("[1, 2, 3]", id="a JSON array"),
    pytest.param('"ping"', id="a JSON string"),
    pytest.param('{"payload": {}}', id="no job_type"),
    pytest.param('{"job_type": 5, "payload": {}}', id="job_type not a str"),
    pytest.param('{"job_type": null, "payload": {}}', id="job_type null"),
    pytest.param('{"job_type": "ping"}', id="no payload"),
    pytest.param('{"job_type": "ping", "payload": [1]}', id="payload a list"),
    pytest.param('{"job_type": "ping", "payload": "x"}', id="payload a str"),
    pytest.param("\x00\x01\x02\xff\xfe\x89PNG\r\n", id="binary-looking"),
    pytest.param(NESTED, id="100000 nested lists"),
    pytest.param(NESTED_PAYLOAD, id="deeply nested payload"),
    pytest.param(HUGE, id="huge"),
    pytest.param(
        '{"job_type":"ping","payload":{"n":' + "9" * 5000 + "}}", id="huge integer"
    ),
]


@pytest.mark.parametrize("body", MALFORMED)
def test_a_body_that_is_not_a_job_is_deleted_and_logged(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], body: str
) -> None:
    handled: list[Payload] = []
    message_id = sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"]

    status = run_once(sqs, queue_url, {"ping": handled.append})

    assert status == 0
    assert handled == []
    assert message_count(sqs, queue_url) == 0
    logged = only_event(logs, "malformed_message_deleted")
    assert logged["log_level"] == "error"
    assert logged["message_id"] == message_id
    assert isinstance(logged["reason"], str)


def test_malformed_messages_never_stop_the_worker_serving_good_ones(
    sqs: SQSClient, queue_url: str
) -> None:
    handled: list[Payload] = []
    for body in ["not json", NESTED, '{"job_type": 5, "payload": {}}']:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    one_queue_group(sqs, queue_url).enqueue("jobs", "ping", {"good": True})

    status = run_once(sqs, queue_url, {"ping": handled.append}, cycles=4)

    assert status == 0
    assert handled == [{"good": True}]
    assert message_count(sqs, queue_url) == 0


def test_an_unknown_job_type_is_kept_and_hidden_for_at_least_300_seconds(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    """Even with the queue's timeout at 0 the message is not visible afterwards."""
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "from_a_newer_deploy", {})

    status = run_once(spy.client, queue_url, {"ping": succeed}, visibility_timeout=0)

    assert status == 0
    assert message_count(sqs, queue_url) == 1
    assert visible_messages(sqs, queue_url) == []
    assert deletes(spy) == 0
    assert visibility_changes(spy) == [300]
    logged = only_event(logs, "unknown_job_type_deferred")
    assert logged["job_type"] == "from_a_newer_deploy"
    assert logged["visibility_timeout"] >= 300


def test_an_unknown_job_type_keeps_a_longer_queue_visibility_timeout(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "unknown", {})

    run_once(spy.client, queue_url, {"ping": succeed}, visibility_timeout=900)

    assert visibility_changes(spy) == [900]
    assert message_count(sqs, queue_url) == 1


class TestHeartbeatFailed:
    def test_a_job_past_its_max_runtime_is_aborted_and_left_for_redelivery(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        aborted: list[bool] = []

        def slow(payload: Payload) -> None:
            aborted.append(current_job.abort_requested.wait(WAIT))

        one_queue_group(sqs, queue_url).enqueue("jobs", "slow", {})

        run_once(
            sqs,
            queue_url,
            {"slow": slow},
            visibility_timeout=2,
            max_runtime_seconds=0.5,
        )

        assert aborted == [True]
        assert message_count(sqs, queue_url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "heartbeat_failed"
        assert only_event(logs, "max_runtime_exceeded")["message_id"]

    def test_a_handler_may_have_its_own_max_runtime(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        def slow(payload: Payload) -> None:
            current_job.abort_requested.wait(WAIT)

        one_queue_group(sqs, queue_url).enqueue("jobs", "slow", {})

        run_once(
            sqs,
            queue_url,
            {"slow": JobHandler(slow, max_runtime_seconds=0.3)},
            visibility_timeout=2,
        )

        assert message_count(sqs, queue_url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "heartbeat_failed"

    @pytest.mark.parametrize(
        ("code", "lost"),
        [
            ("ReceiptHandleIsInvalid", True),
            ("AWS.SimpleQueueService.MessageNotInflight", True),
            ("InternalError", False),
        ],
    )
    def test_a_failed_extension_means_the_message_is_not_deleted_even_on_success(
        self,
        sqs: SQSClient,
        queue_url: str,
        logs: list[EventDict],
        code: str,
        lost: bool,
    ) -> None:
        spy = SpyClient(sqs)
        spy.failing["change_message_visibility"] = code
        spy.failing["change_message_visibility_batch"] = code
        finished: list[bool] = []

        def succeeds(payload: Payload) -> None:
            current_job.abort_requested.wait(WAIT)
            finished.append(True)

        one_queue_group(sqs, queue_url).enqueue("jobs", "work", {})

        run_once(spy.client, queue_url, {"work": succeeds}, visibility_timeout=1)

        assert finished == [True]
        assert deletes(spy) == 0
        assert message_count(sqs, queue_url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "heartbeat_failed"
        assert only_event(logs, "heartbeat_failed")["ownership_lost"] is lost

    def test_a_message_deleted_behind_the_workers_back_ends_as_heartbeat_failed(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        def purge_then_wait(payload: Payload) -> None:
            sqs.purge_queue(QueueUrl=queue_url)
            current_job.abort_requested.wait(WAIT)

        one_queue_group(sqs, queue_url).enqueue("jobs", "work", {})

        run_once(sqs, queue_url, {"work": purge_then_wait}, visibility_timeout=1)

        assert only_event(logs, "job_finished")["outcome"] == "heartbeat_failed"
        assert only_event(logs, "heartbeat_failed")["ownership_lost"] is True


def give_up(payload: Payload) -> None:
    raise NonRetryableError("bad input")


@pytest.mark.parametrize(
    ("handler", "processing_outcome", "code", "lost"),
    [
        (succeed, "success", "ReceiptHandleIsInvalid", True),
        (succeed, "success", "MessageNotInflight", True),
        (give_up, "delete", "InternalError", False),
    ],
)
def test_a_delete_that_fails_ends_as_delete_failed_with_the_processing_outcome(
    sqs: SQSClient,
    queue_url: str,
    logs: list[EventDict],
    handler: t.Any,
    processing_outcome: str,
    code: str,
    lost: bool,
) -> None:
    spy = SpyClient(sqs)
    spy.failing["delete_message"] = code
    spy.failing["delete_message_batch"] = code
    one_queue_group(sqs, queue_url).enqueue("jobs", "work", {})

    run_once(spy.client, queue_url, {"work": handler}, visibility_timeout=0)

    assert deletes(spy) == 1
    assert message_count(sqs, queue_url) == 1
    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == "delete_failed"
    assert finished["processing_outcome"] == processing_outcome
    assert finished["ownership_lost"] is lost
    assert finished["log_level"] == "error"


class TestRetries:
    def test_retry_job_sets_the_visibility_to_its_delay(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        def later(payload: Payload) -> None:
            raise RetryJob(delay_seconds=60)

        spy = SpyClient(sqs)
        one_queue_group(sqs, queue_url).enqueue("jobs", "later", {})

        run_once(spy.client, queue_url, {"later": later}, visibility_timeout=0)

        assert visibility_changes(spy) == [60]
        assert visible_messages(sqs, queue_url) == []
        assert message_count(sqs, queue_url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "retry"

    @pytest.mark.parametrize(("delay", "error"), [(-1, ValueError), (1.5, TypeError)])
    def test_retry_job_refuses_a_bad_delay(
        self, delay: t.Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error, match="delay_seconds"):
            RetryJob(delay_seconds=delay)

    @pytest.mark.parametrize("earlier_receives", [0, 2])
    def test_retry_backoff_hides_the_message_for_d_to_2d_seconds(
        self, sqs: SQSClient, queue_url: str, earlier_receives: int
    ) -> None:
        """``d = base * 2 ** (receive_count - 1)``, here with base 10."""
        spy = SpyClient(sqs)
        group = one_queue_group(sqs, queue_url)
        for _ in range(5):
            group.enqueue("jobs", "flaky", {})
        for _ in range(earlier_receives):
            sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )

        run_once(
            spy.client,
            queue_url,
            {"flaky": fail},
            cycles=5,
            visibility_timeout=0,
            retry_backoff_seconds=10,
        )

        d = 10 * 2**earlier_receives
        changes = visibility_changes(spy)
        assert len(changes) == 5
        assert all(d <= seconds <= 2 * d for seconds in changes), changes
        assert visible_messages(sqs, queue_url) == []
        assert message_count(sqs, queue_url) == 5

    def test_the_heartbeat_stops_before_the_backoff_visibility_is_set(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        """No late extension overwrites the backoff once the handler failed."""
        spy = SpyClient(sqs)

        def slow_sqs(call: dict[str, t.Any], response: t.Any) -> None:
            # A slow answer to the backoff call: time enough for a heartbeat
            # still running to send one more extension after it.
            if call["VisibilityTimeout"] >= 100:
                time.sleep(0.6)

        spy.after["change_message_visibility"] = slow_sqs
        one_queue_group(sqs, queue_url).enqueue("jobs", "flaky", {})

        def flaky(payload: Payload) -> None:
            assert poll_until(lambda: len(visibility_changes(spy)) >= 2)
            raise RuntimeError("fails after a while")

        run_once(
            spy.client,
            queue_url,
            {"flaky": flaky},
            visibility_timeout=1,
            retry_backoff_seconds=100,
        )

        changes = visibility_changes(spy)
        assert set(changes[:-1]) == {1}
        assert 100 <= changes[-1] <= 200
        assert visible_messages(sqs, queue_url) == []

    def test_without_backoff_a_failed_job_keeps_the_queue_visibility(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        spy = SpyClient(sqs)
        one_queue_group(sqs, queue_url).enqueue("jobs", "flaky", {})

        run_once(spy.client, queue_url, {"flaky": fail}, visibility_timeout=0)

        assert visibility_changes(spy) == []


class TestDeadLetters:
    @pytest.fixture
    def dlq_url(self, sqs: SQSClient) -> str:
        return create_queue(sqs, "jobs-dlq")

    def test_a_job_failing_its_last_receive_moves_to_the_dlq_with_its_reason(
        self, sqs: SQSClient, dlq_url: str, logs: list[EventDict]
    ) -> None:
        url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=1)
        producer = SpyClient(sqs)
        one_queue_group(producer.client, url).enqueue(
            "jobs",
            "charge",
            {"order": 7},
            correlation_fields={"request_id": "r-1"},
            message_attributes={"tenant": {"DataType": "String", "StringValue": "t"}},
        )
        (original,) = producer.calls_to("send_message")

        def charge(payload: Payload) -> None:
            raise ValueError("card declined")

        before = dt.datetime.now(dt.UTC)
        run_once(sqs, url, {"charge": charge}, visibility_timeout=0)

        assert message_count(sqs, url) == 0
        (dead,) = visible_messages(sqs, dlq_url)
        assert dead["Body"] == original["MessageBody"]
        attributes = dict(dead["MessageAttributes"])
        dead_letter = attributes.pop("dead_letter")
        assert dead_letter["DataType"] == "String"
        reason = json.loads(dead_letter["StringValue"])
        assert set(reason) == {
            "error_type",
            "error",
            "failed_at",
            "source_queue",
            "receive_count",
        }
        assert attributes == original["MessageAttributes"]
        assert set(attributes) == {"correlation_fields", "tenant", "job_type"}
        assert reason["error_type"] == "ValueError"
        assert reason["error"] == "card declined"
        assert reason["source_queue"] == "jobs"
        assert reason["receive_count"] == 1
        failed_at = dt.datetime.fromisoformat(reason["failed_at"])
        assert before - dt.timedelta(seconds=1) <= failed_at
        assert failed_at <= dt.datetime.now(dt.UTC)
        assert only_event(logs, "job_finished")["outcome"] == "dead_lettered"

    def test_when_the_dlq_cannot_be_reached_the_message_is_kept_for_sqs_redrive(
        self, sqs: SQSClient, dlq_url: str, logs: list[EventDict]
    ) -> None:
        url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=1)
        one_queue_group(sqs, url).enqueue("jobs", "charge", {})
        spy = SpyClient(sqs)
        spy.failing["send_message"] = "AccessDenied"

        run_once(spy.client, url, {"charge": fail}, visibility_timeout=0)

        assert deletes(spy) == 0
        assert message_count(sqs, url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "retry"
        # The next receive past maxReceiveCount: SQS's own redrive moves it.
        assert visible_messages(sqs, url) == []
        assert len(visible_messages(sqs, dlq_url)) == 1

    def test_a_job_with_receives_left_is_not_dead_lettered(
        self, sqs: SQSClient, dlq_url: str, logs: list[EventDict]
    ) -> None:
        url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=3)
        one_queue_group(sqs, url).enqueue("jobs", "charge", {})

        run_once(sqs, url, {"charge": fail}, visibility_timeout=0)

        assert message_count(sqs, url) == 1
        assert message_count(sqs, dlq_url) == 0
        assert only_event(logs, "job_finished")["outcome"] == "retry"


class TestDeferral:
    def test_a_job_not_due_yet_is_sent_again_and_the_original_deleted(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        handled: list[Payload] = []
        run_at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
        body = json.dumps(
            {"job_type": "report", "payload": {"n": 1}, "run_at": run_at.isoformat()}
        )
        attributes: dict[str, t.Any] = {
            "correlation_fields": {
                "DataType": "String",
                "StringValue": '{"request_id":"r-1"}',
            }
        }
        original_id = sqs.send_message(
            QueueUrl=queue_url, MessageBody=body, MessageAttributes=attributes
        )["MessageId"]
        spy = SpyClient(sqs)

        run_once(spy.client, queue_url, {"report": handled.append})

        assert handled == []
        (resent,) = spy.calls_to("send_message")
        assert resent["MessageBody"] == body
        assert resent["MessageAttributes"] == attributes
        assert resent["DelaySeconds"] == 900
        assert visible_messages(sqs, queue_url) == []
        delayed = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]["ApproximateNumberOfMessagesDelayed"]
        assert delayed == "1"
        assert message_count(sqs, queue_url) == 1
        finished = only_event(logs, "job_finished")
        assert finished["outcome"] == "deferred"
        assert finished["message_id"] == original_id

    def test_when_the_resend_fails_the_original_is_kept(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        run_at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
        body = json.dumps(
            {"job_type": "report", "payload": {}, "run_at": run_at.isoformat()}
        )
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        spy = SpyClient(sqs)
        spy.failing["send_message"] = "InternalError"

        run_once(spy.client, queue_url, {"report": succeed}, visibility_timeout=0)

        assert deletes(spy) == 0
        assert [m["Body"] for m in visible_messages(sqs, queue_url)] == [body]
        assert only_event(logs, "job_finished")["outcome"] == "retry"

    def test_a_job_due_within_fifteen_minutes_is_resent_with_the_remaining_delay(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        run_at = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)
        body = json.dumps({"job_type": "report", "payload": {}, "run_at": str(run_at)})
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        spy = SpyClient(sqs)

        run_once(spy.client, queue_url, {"report": succeed})

        (resent,) = spy.calls_to("send_message")
        assert 590 <= resent["DelaySeconds"] <= 600

    def test_a_job_whose_run_at_has_passed_runs_now(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        handled: list[Payload] = []
        run_at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
        body = json.dumps(
            {"job_type": "report", "payload": {"n": 2}, "run_at": run_at.isoformat()}
        )
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)

        run_once(sqs, queue_url, {"report": handled.append})

        assert handled == [{"n": 2}]
        assert message_count(sqs, queue_url) == 0

    @pytest.mark.parametrize(
        "run_at",
        [
            "tomorrow",
            "2030-01-01T00:00:00",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
        ],
    )
    def test_a_job_whose_run_at_cannot_be_read_runs_now(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict], run_at: str
    ) -> None:
        handled: list[Payload] = []
        body = json.dumps({"job_type": "report", "payload": {}, "run_at": run_at})
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)

        run_once(sqs, queue_url, {"report": handled.append}, visibility_timeout=0)

        assert handled == [{}]
        assert message_count(sqs, queue_url) == 0
        assert only_event(logs, "run_at_invalid")["log_level"] == "warning"

    def test_a_job_whose_run_at_is_centuries_ahead_runs_now_and_is_not_resent(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        """Another producer's run_at past enqueue's one-year limit is not
        re-sent every 15 minutes for ever."""
        handled: list[Payload] = []
        body = json.dumps(
            {"job_type": "report", "payload": {}, "run_at": "2500-01-01T00:00:00Z"}
        )
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        spy = SpyClient(sqs)

        run_once(spy.client, queue_url, {"report": handled.append})

        assert handled == [{}]
        assert spy.calls_to("send_message") == []
        assert message_count(sqs, queue_url) == 0
        assert only_event(logs, "run_at_too_far")["log_level"] == "warning"

    def test_an_enqueued_deferral_is_deferred_again_by_the_worker(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        """The body enqueue writes for a long delay is one the worker defers."""
        spy = SpyClient(sqs)
        one_queue_group(spy.client, queue_url).enqueue(
            "jobs", "report", {}, delay_seconds=3 * 3600
        )
        (sent,) = spy.calls_to("send_message")
        sqs.send_message(QueueUrl=queue_url, MessageBody=sent["MessageBody"])

        run_once(sqs, queue_url, {"report": succeed})

        assert only_event(logs, "job_finished")["outcome"] == "deferred"


def test_a_handler_raising_system_exit_leaves_its_message_for_redelivery(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    """Neither deleted nor kept invisible: the running worker gets it again."""
    receives: list[int] = []

    def exit_first(payload: Payload) -> None:
        receives.append(current_job.receive_count or 0)
        if len(receives) == 1:
            raise SystemExit(3)

    one_queue_group(sqs, queue_url).enqueue("jobs", "exit", {})
    group = one_queue_group(sqs, queue_url, visibility_timeout=1)
    worker = JobWorker(group, {"exit": exit_first}, idle_wait_seconds=1)
    thread = WorkerThread(worker)
    try:
        assert poll_until(lambda: len(receives) == 2)
    finally:
        worker.request_stop()
        assert thread.join() == 0
    assert receives == [1, 2]
    assert only_event(logs, "job_thread_error")
    assert [e["outcome"] for e in events(logs, "job_finished")] == ["success"]
