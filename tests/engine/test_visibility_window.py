"""SQS's 12-hour rule: no visibility may end more than 12 hours after the receive.

SQS (and moto) refuse a change past that, which would leave the message
visible long before the worker meant it to be. The worker caps every change
at what is left of the window. Messages here are made to look received long
ago by moving the receive time the worker records (``Lease.received_at``).
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.worker._delivery import Delivery
from flask_sqs_jobs.engine.worker._heartbeat import Heartbeat
from flask_sqs_jobs.engine.worker._lease import Lease
from flask_sqs_jobs.engine.worker._lease import VISIBILITY_WINDOW_ENDED
from flask_sqs_jobs.engine.worker._lease import WINDOW_MARGIN_SECONDS
from flask_sqs_jobs.engine.worker._settle_calls import retry_delay
from moto.sqs.models import sqs_backends

from tests.conftest import REGION
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.helpers import WAIT
from tests.support import message_count
from tests.support import queue_counts
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

TWELVE_HOURS = 43_200
#: The account moto puts queues in.
MOTO_ACCOUNT_ID = "123456789012"
#: Seconds of the window left for a message received 11 h 59 min ago.
LEFT = 60 - WINDOW_MARGIN_SECONDS


ReceivedAgo: t.TypeAlias = cabc.Callable[[float], None]


@pytest.fixture
def received_ago(monkeypatch: pytest.MonkeyPatch) -> ReceivedAgo:
    """Make every message the worker receives look received ``seconds`` ago."""

    def set_age(seconds: float) -> None:
        hold = Heartbeat.hold

        def hold_older(
            self: Heartbeat,
            queue: SqsQueue,
            queue_name: str,
            receipt_handle: str,
            message_id: str,
            received_at: float,
        ) -> Lease:
            return hold(
                self, queue, queue_name, receipt_handle, message_id,
                received_at - seconds,
            )  # fmt: skip

        monkeypatch.setattr(Heartbeat, "hold", hold_older)

    return set_age


def run_once(
    client: SQSClient, url: str, handlers: dict[str, t.Any], **options: t.Any
) -> int:
    group = one_queue_group(client, url, **options)
    return JobWorker(group, handlers, stop_after(1), idle_wait_seconds=0).run()


def retry_in_twelve_hours(payload: Payload) -> None:
    raise RetryJob(delay_seconds=TWELVE_HOURS)


def fail(payload: Payload) -> None:
    raise RuntimeError("temporary failure")


@pytest.mark.parametrize(
    ("handler", "options"),
    [
        (retry_in_twelve_hours, {}),
        (fail, {"retry_backoff_seconds": 30_000}),
    ],
    ids=["RetryJob(43200)", "backoff"],
)
def test_a_retry_late_in_the_window_is_capped_to_what_is_left_and_succeeds(
    sqs: SQSClient,
    queue_url: str,
    logs: list[EventDict],
    received_ago: ReceivedAgo,
    handler: t.Callable[[Payload], None],
    options: dict[str, t.Any],
) -> None:
    """Uncapped, SQS refuses the change and the message is visible again far
    sooner than the retry meant."""
    received_ago(11 * 3600 + 59 * 60)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "later", {})

    run_once(spy.client, queue_url, {"later": handler}, visibility_timeout=0, **options)

    [change] = visibility_changes(spy)
    assert LEFT - 2 <= change <= LEFT
    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == "retry"
    assert finished["retry_in_seconds"] == change
    assert finished["retry_capped_from_seconds"] >= 30_000
    assert "visibility_error" not in finished
    assert visible_messages(sqs, queue_url) == []
    assert message_count(sqs, queue_url) == 1


def test_an_uncapped_change_is_one_sqs_refuses(sqs: SQSClient, queue_url: str) -> None:
    """Why the cap exists: moto, like SQS, refuses 12 hours after a receive."""
    one_queue_group(sqs, queue_url).enqueue("jobs", "later", {})
    [message] = sqs.receive_message(QueueUrl=queue_url)["Messages"]

    with pytest.raises(sqs.exceptions.ClientError, match="beyond the limit"):
        sqs.change_message_visibility(
            QueueUrl=queue_url,
            ReceiptHandle=message["ReceiptHandle"],
            VisibilityTimeout=TWELVE_HOURS,
        )


def test_a_change_refused_by_a_server_counting_from_the_send_is_sent_again_within_it(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    """moto counts the 12 hours from SentTimestamp: a message that waited
    11 h 59 min in the queue is refused a 12-hour retry just after its receive."""
    one_queue_group(sqs, queue_url).enqueue("jobs", "later", {})
    backend = sqs_backends[MOTO_ACCOUNT_ID][REGION]
    [message] = t.cast(list[t.Any], backend.queues["jobs"]._messages)
    message.sent_timestamp -= (11 * 3600 + 59 * 60) * 1000
    spy = SpyClient(sqs)

    run_once(
        spy.client, queue_url, {"later": retry_in_twelve_hours}, visibility_timeout=0
    )

    first, second = visibility_changes(spy)
    assert first > LEFT
    assert LEFT - 2 <= second <= LEFT
    finished = only_event(logs, "job_finished")
    assert finished["retry_in_seconds"] == second
    assert "visibility_error" not in finished
    assert visible_messages(sqs, queue_url) == []


def test_a_retry_once_the_window_is_spent_sends_no_change_rather_than_0(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], received_ago: ReceivedAgo
) -> None:
    """0 would make the message visible at once; SQS grants nothing more."""
    received_ago(TWELVE_HOURS)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "later", {})

    run_once(
        spy.client, queue_url, {"later": retry_in_twelve_hours}, visibility_timeout=0
    )

    assert visibility_changes(spy) == []
    assert only_event(logs, "job_finished")["retry_in_seconds"] == 0


def test_retry_job_0_still_makes_the_message_visible_at_once(
    sqs: SQSClient, queue_url: str, received_ago: ReceivedAgo
) -> None:
    received_ago(TWELVE_HOURS)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "now", {})

    def now(payload: Payload) -> None:
        raise RetryJob(delay_seconds=0)

    run_once(spy.client, queue_url, {"now": now}, visibility_timeout=0)

    assert visibility_changes(spy) == [0]


def test_an_unknown_job_type_late_in_the_window_is_hidden_for_what_is_left(
    sqs: SQSClient, queue_url: str, received_ago: ReceivedAgo
) -> None:
    received_ago(11 * 3600 + 59 * 60)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "from_a_newer_deploy", {})

    run_once(spy.client, queue_url, {"ping": print}, visibility_timeout=0)

    [change] = visibility_changes(spy)
    assert LEFT - 2 <= change <= LEFT
    assert visible_messages(sqs, queue_url) == []


def test_the_heartbeat_extends_no_further_than_the_window(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], received_ago: ReceivedAgo
) -> None:
    received_ago(11 * 3600 + 59 * 60)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "slow", {})

    def slow(payload: Payload) -> None:
        assert poll_until(lambda: len(visibility_changes(spy)) >= 1)

    run_once(spy.client, queue_url, {"slow": slow}, visibility_timeout=600)

    [change] = visibility_changes(spy)
    assert LEFT - 2 <= change <= LEFT
    assert only_event(logs, "job_finished")["outcome"] == "success"


def test_a_job_still_running_when_the_window_ends_is_aborted_and_kept(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], received_ago: ReceivedAgo
) -> None:
    """The message is visible again then: the worker no longer owns it."""
    received_ago(TWELVE_HOURS - WINDOW_MARGIN_SECONDS - 2)
    spy = SpyClient(sqs)
    one_queue_group(sqs, queue_url).enqueue("jobs", "endless", {})

    def endless(payload: Payload) -> None:
        assert current_job.abort_requested.wait(WAIT)

    run_once(spy.client, queue_url, {"endless": endless}, visibility_timeout=600)

    # At most the second or two left, and never 0 (visible at once).
    assert all(1 <= change <= 2 for change in visibility_changes(spy))
    finished = only_event(logs, "job_finished")
    assert finished["outcome"] == "heartbeat_failed"
    assert finished["reason"] == VISIBILITY_WINDOW_ENDED
    # Visible again within the second or two granted, and still there.
    assert poll_until(lambda: queue_counts(sqs, queue_url) == (1, 0, 0))
    assert message_count(sqs, queue_url) == 1


@pytest.mark.parametrize("base", [0.5, 1e300, 10**300])
@pytest.mark.parametrize("receive_count", [10**6, 2**70])
def test_the_backoff_is_computed_for_any_receive_count_and_base(
    sqs: SQSClient, queue_url: str, base: float, receive_count: int
) -> None:
    """``base * 2 ** (receive_count - 1)`` would overflow; it is capped first."""
    queue = SqsQueue(queue_url, boto_client=sqs, retry_backoff_seconds=base)
    lease = Lease(queue, "jobs", "receipt", "id", received_at=0.0)
    message = {"Attributes": {"ApproximateReceiveCount": str(receive_count)}}
    delivery = Delivery("jobs", queue, message, lease)

    assert retry_delay(delivery, RuntimeError("failed")) == TWELVE_HOURS
