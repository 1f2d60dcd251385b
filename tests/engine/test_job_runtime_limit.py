"""A job's own ``max_runtime_seconds=``: refused when hostile, carried in the body,
honoured by the worker within its handler's and queue's limits."""

from __future__ import annotations

import json
import math
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs.engine import JobHandler

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import WAIT
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def run_once(client: SQSClient, url: str, handlers: dict[str, t.Any]) -> None:
    group = one_queue_group(client, url, visibility_timeout=2)
    JobWorker(group, handlers, stop_after(1), idle_wait_seconds=0).run()


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1, ValueError),
        (0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (43_201, ValueError),
        (10**400, ValueError),
        pytest.param(10**5000, ValueError, id="5000-digit int"),
        (True, TypeError),
        ("60", TypeError),
    ],
)
def test_a_hostile_limit_is_refused_at_enqueue_and_nothing_is_sent(
    sqs: SQSClient, queue_url: str, value: object, error: type[Exception]
) -> None:
    group = one_queue_group(sqs, queue_url)

    with pytest.raises(error, match="max_runtime_seconds must be"):
        group.enqueue("jobs", "slow", {}, max_runtime_seconds=t.cast(t.Any, value))
    with pytest.raises(error, match=r"jobs\[1\]: max_runtime_seconds must be"):
        group.enqueue_many(
            "jobs",
            [("ok", {}), {"job_type": "slow", "max_runtime_seconds": value}],
        )

    assert message_count(sqs, queue_url) == 0


def test_the_limit_travels_in_the_body_and_old_bodies_have_none(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)
    group.enqueue("jobs", "slow", {"n": 1}, max_runtime_seconds=90, job_id="one")
    group.enqueue_many(
        "jobs", [{"job_type": "slow", "max_runtime_seconds": 1.5, "job_id": "many"}]
    )
    group.enqueue("jobs", "slow", {}, job_id="old")

    bodies = {
        body["job_id"]: body
        for body in (json.loads(m["Body"]) for m in visible_messages(sqs, queue_url))
    }
    assert bodies["one"]["max_runtime_seconds"] == 90
    assert bodies["many"]["max_runtime_seconds"] == 1.5
    assert "max_runtime_seconds" not in bodies["old"]


def test_the_worker_stops_a_job_at_its_own_limit_below_its_handlers(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    aborted: list[bool] = []

    def slow(payload: Payload) -> None:
        aborted.append(current_job.abort_requested.wait(WAIT))

    one_queue_group(sqs, queue_url).enqueue("jobs", "slow", {}, max_runtime_seconds=0.3)

    run_once(sqs, queue_url, {"slow": JobHandler(slow, max_runtime_seconds=600)})

    assert aborted == [True]
    assert message_count(sqs, queue_url) == 1
    assert only_event(logs, "job_finished")["outcome"] == "heartbeat_failed"
    assert only_event(logs, "max_runtime_exceeded")["message_id"]


@pytest.mark.parametrize("value", [-5, 0, "soon", True, None, [1], 1e300])
def test_a_hostile_limit_in_a_received_body_is_ignored_with_a_warning(
    sqs: SQSClient, queue_url: str, logs: list[EventDict], value: object
) -> None:
    seen: list[float | None] = []

    def quick(payload: Payload) -> None:
        seen.append(current_job.max_runtime_seconds)

    body = {"job_type": "quick", "payload": {}, "max_runtime_seconds": value}
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))

    run_once(sqs, queue_url, {"quick": quick})

    assert seen == [None]
    assert only_event(logs, "job_finished")["outcome"] == "success"
    warnings = [e for e in logs if e["event"] == "max_runtime_invalid"]
    assert len(warnings) == (0 if value is None else 1)
