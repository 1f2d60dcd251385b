"""QueueGroup.enqueue_many: batches of SendMessageBatch, validated up front."""

from __future__ import annotations

import collections.abc as cabc
import json
import threading
import typing as t
from unittest import mock

import pytest
from flask_sqs_jobs import EnqueueBatchError
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import UnknownQueueError

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def bodies_by_id(sqs: SQSClient, url: str) -> dict[str, dict[str, t.Any]]:
    """Receive (and hide) every message on the queue; body by MessageId."""
    bodies: dict[str, dict[str, t.Any]] = {}
    while messages := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60
    ).get("Messages", []):
        bodies.update((m["MessageId"], json.loads(m["Body"])) for m in messages)
    return bodies


def test_pairs_and_dicts_are_sent_and_their_ids_returned_in_order(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url)

    ids = group.enqueue_many(
        "jobs",
        [
            ("ping", {"n": 0}),
            {"job_type": "ping", "payload": {"n": 1}},
            ("ping", None),
            {"job_type": "pong"},
        ],
    )

    assert len(ids) == 4
    assert all(isinstance(message_id, str) for message_id in ids)
    sent = bodies_by_id(sqs, queue_url)
    assert [sent[message_id] for message_id in ids] == [
        {"job_type": "ping", "payload": {"n": 0}, "job_id": mock.ANY},
        {"job_type": "ping", "payload": {"n": 1}, "job_id": mock.ANY},
        {"job_type": "ping", "payload": {}, "job_id": mock.ANY},
        {"job_type": "pong", "payload": {}, "job_id": mock.ANY},
    ]
    assert len(spy.calls_to("send_message_batch")) == 1
    assert spy.calls_to("send_message") == []


def test_a_request_carries_at_most_ten_jobs(sqs: SQSClient, queue_url: str) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url)

    ids = group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(25)])

    sizes = [len(call["Entries"]) for call in spy.calls_to("send_message_batch")]
    assert sorted(sizes) == [5, 10, 10]  # a standard queue's requests go in parallel
    sent = bodies_by_id(sqs, queue_url)
    assert [sent[message_id]["payload"]["n"] for message_id in ids] == list(range(25))


def test_a_request_stays_within_the_queues_size_limit(sqs: SQSClient) -> None:
    url = create_queue(sqs, "small", MaximumMessageSize="1024")
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, url)

    group.enqueue_many("jobs", [("store", {"blob": "x" * 400}) for _ in range(5)])

    requests = spy.calls_to("send_message_batch")
    assert len(requests) >= 3
    for request in requests:
        assert sum(len(e["MessageBody"]) for e in request["Entries"]) <= 1024
    assert message_count(sqs, url) == 5


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("ping", {"x": float("nan")}), ValueError),
        (("", {}), ValueError),
        (("ping", [1]), TypeError),
        ({"payload": {}}, TypeError),
        ({"job_type": "ping", "delay_seconds": -1}, ValueError),
        ({"job_type": "ping", "colour": "red"}, TypeError),
        ("ping", TypeError),
    ],
)
def test_every_job_is_checked_before_any_is_sent(
    sqs: SQSClient, queue_url: str, bad: t.Any, error: type[Exception]
) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url)
    jobs = [("ping", {"n": 0}), ("ping", {"n": 1}), bad, ("ping", {"n": 3})]

    with pytest.raises(error, match=r"jobs\[2\]"):
        group.enqueue_many("jobs", jobs)

    assert spy.calls_to("send_message_batch") == []
    assert message_count(sqs, queue_url) == 0


def test_options_of_a_dict_job_apply_to_that_job(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url)

    group.enqueue_many(
        "jobs",
        [
            {
                "job_type": "ping",
                "payload": {},
                "correlation_fields": {"request_id": "r-1"},
                "delay_seconds": 60,
                "message_attributes": {
                    "tenant": {"DataType": "String", "StringValue": "t"}
                },
            },
            ("ping", {}),
        ],
    )

    (request,) = spy.calls_to("send_message_batch")
    first, second = request["Entries"]
    assert first["DelaySeconds"] == 60
    assert set(first["MessageAttributes"]) == {
        "correlation_fields",
        "tenant",
        "job_type",
    }
    assert "DelaySeconds" not in second
    assert set(second["MessageAttributes"]) == {"job_type"}


class PartlyRefusing(SpyClient):
    """Lets SQS refuse the entries whose position is listed."""

    def __init__(self, client: SQSClient, refuse: set[int]) -> None:
        super().__init__(client)
        self.refuse = refuse

    def send_message_batch(self, **kwargs: t.Any) -> dict[str, t.Any]:
        entries = kwargs["Entries"]
        keep = [e for i, e in enumerate(entries) if i not in self.refuse]
        response = dict(self.wrapped.send_message_batch(**{**kwargs, "Entries": keep}))
        response["Failed"] = [
            {
                "Id": e["Id"],
                "SenderFault": False,
                "Code": "InternalError",
                "Message": "try again",
            }
            for i, e in enumerate(entries)
            if i in self.refuse
        ]
        return response


def test_a_partial_failure_raises_with_what_was_and_was_not_enqueued(
    sqs: SQSClient, queue_url: str
) -> None:
    client = PartlyRefusing(sqs, refuse={1, 3})
    group = one_queue_group(client.client, queue_url)

    with pytest.raises(EnqueueBatchError) as info:
        group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(4)])

    error = info.value
    assert [index for index, _ in error.enqueued] == [0, 2]
    assert error.failed == [
        (1, "InternalError", "try again"),
        (3, "InternalError", "try again"),
    ]
    sent = bodies_by_id(sqs, queue_url)
    assert sorted(sent) == sorted(message_id for _, message_id in error.enqueued)
    assert [sent[message_id]["payload"]["n"] for _, message_id in error.enqueued] == [
        0,
        2,
    ]


def test_a_refused_request_fails_every_job_in_it(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    spy.failing["send_message_batch"] = "AWS.SimpleQueueService.BatchRequestTooLong"
    group = one_queue_group(spy.client, queue_url)

    with pytest.raises(EnqueueBatchError) as info:
        group.enqueue_many("jobs", [("ping", {}), ("ping", {})])

    assert info.value.enqueued == []
    assert [(i, code) for i, code, _ in info.value.failed] == [
        (0, "AWS.SimpleQueueService.BatchRequestTooLong"),
        (1, "AWS.SimpleQueueService.BatchRequestTooLong"),
    ]


def test_no_jobs_sends_nothing(sqs: SQSClient, queue_url: str) -> None:
    spy = SpyClient(sqs)

    assert one_queue_group(spy.client, queue_url).enqueue_many("jobs", []) == []
    assert spy.calls_to("send_message_batch") == []


def test_an_unknown_queue_raises_unknown_queue_error(
    sqs: SQSClient, queue_url: str
) -> None:
    with pytest.raises(UnknownQueueError):
        one_queue_group(sqs, queue_url).enqueue_many("nope", [("ping", {})])


def test_every_job_sent_is_logged_as_enqueued(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    ids = one_queue_group(sqs, queue_url).enqueue_many(
        "jobs", [("ping", {}), ("pong", {})]
    )

    logged = events(logs, "job_enqueued")
    assert [(e["message_id"], e["job_type"]) for e in logged] == [
        (ids[0], "ping"),
        (ids[1], "pong"),
    ]


def test_fifo_jobs_each_need_a_message_group_id(sqs: SQSClient) -> None:
    url = create_queue(sqs, "jobs.fifo", fifo=True)
    group = one_queue_group(sqs, url)

    with pytest.raises(ValueError, match=r"jobs\[1\].*message_group_id"):
        group.enqueue_many(
            "jobs",
            [{"job_type": "ping", "message_group_id": "g"}, ("ping", {})],
        )
    group.enqueue_many(
        "jobs",
        [
            {"job_type": "ping", "message_group_id": "g", "payload": {"n": 0}},
            {"job_type": "ping", "message_group_id": "g", "payload": {"n": 1}},
        ],
    )

    assert message_count(sqs, url) == 2


def test_produce_middleware_wraps_each_job_and_sees_its_message_id(
    sqs: SQSClient, queue_url: str
) -> None:
    seen: list[tuple[str, str]] = []

    class Trace(JobMiddleware):
        injects_trace_headers = True

        def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
            job.trace_headers["traceparent"] = f"00-{job.payload['n']}-01"
            message_id = call_next(job)
            seen.append((job.trace_headers["traceparent"], message_id))
            return message_id

    spy = SpyClient(sqs)
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(queue_url, boto_client=spy.client)}},
        middleware=[Trace()],
    )

    ids = group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(3)])

    assert sorted(seen) == sorted((f"00-{n}-01", ids[n]) for n in range(3))
    assert len(spy.calls_to("send_message_batch")) == 1
    received = {
        m["MessageId"]: m["MessageAttributes"]["traceparent"]["StringValue"]
        for m in visible_messages(sqs, queue_url)
    }
    assert received == {ids[n]: f"00-{n}-01" for n in range(3)}


def test_a_standard_queue_s_requests_are_sent_at_once(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)
    # Each request waits until three are on their way: sent one after the
    # other, the first would wait in vain.
    together = threading.Barrier(3, timeout=10)

    def wait_for_the_others(kwargs: dict[str, t.Any]) -> None:
        together.wait()

    spy.before["send_message_batch"] = wait_for_the_others
    group = one_queue_group(spy.client, queue_url)

    ids = group.enqueue_many("jobs", [("ping", {"n": n}) for n in range(30)])

    sent = bodies_by_id(sqs, queue_url)
    assert [sent[message_id]["payload"]["n"] for message_id in ids] == list(range(30))


def test_a_fifo_queue_s_requests_are_sent_one_after_the_other_in_order(
    sqs: SQSClient,
) -> None:
    url = create_queue(sqs, "ordered.fifo", fifo=True)
    spy = SpyClient(sqs)
    in_flight: list[int] = [0]
    most = [0]
    lock = threading.Lock()

    def enter(kwargs: dict[str, t.Any]) -> None:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])

    def leave(kwargs: dict[str, t.Any], response: t.Any) -> None:
        with lock:
            in_flight[0] -= 1

    spy.before["send_message_batch"] = enter
    spy.after["send_message_batch"] = leave
    group = one_queue_group(spy.client, url)

    group.enqueue_many(
        "jobs",
        [
            {"job_type": "ping", "payload": {"n": n}, "message_group_id": "g"}
            for n in range(25)
        ],
    )

    firsts = [
        json.loads(call["Entries"][0]["MessageBody"])["payload"]["n"]
        for call in spy.calls_to("send_message_batch")
    ]
    assert (firsts, most[0]) == ([0, 10, 20], 1)
