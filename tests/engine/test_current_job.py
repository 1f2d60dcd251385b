"""Jobs at run time: ``current_job`` and ``async def`` handlers."""

from __future__ import annotations

import asyncio
import threading
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup

from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


@pytest.fixture
def group(sqs: SQSClient, queue_url: str) -> QueueGroup:
    """The SQS queue ``jobs`` under the logical name ``default``."""
    return QueueGroup.build(
        boto_client=sqs, queues={"default": {"url": queue_url, "visibility_timeout": 0}}
    )


def test_current_job_describes_the_running_job(group: QueueGroup) -> None:
    seen: list[dict[str, t.Any]] = []
    message_id = group.enqueue(
        "default", "ping", {"n": 1}, correlation_fields={"request_id": "r-1"}
    )

    def handler(payload: Payload) -> None:
        seen.append(
            {
                "job_type": current_job.job_type,
                "queue": current_job.queue,
                "message_id": current_job.message_id,
                "receive_count": current_job.receive_count,
                "correlation_fields": current_job.correlation_fields,
                "payload": current_job.payload,
                "abort_requested": current_job.abort_requested.is_set(),
            }
        )

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert seen == [
        {
            "job_type": "ping",
            "queue": "default",
            "message_id": message_id,
            "receive_count": 1,
            "correlation_fields": {"request_id": "r-1"},
            "payload": {"n": 1},
            "abort_requested": False,
        }
    ]


def test_abort_requested_is_a_threading_event(group: QueueGroup) -> None:
    kinds: list[type] = []
    group.enqueue("default", "ping", {})

    def handler(payload: Payload) -> None:
        kinds.append(type(current_job.abort_requested))

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert kinds == [threading.Event]


def test_current_job_outside_a_job_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="current_job"):
        current_job.job_type  # noqa: B018 - the attribute access is the test
    assert not current_job


def test_current_job_is_unbound_again_after_the_job(
    sqs: SQSClient, group: QueueGroup
) -> None:
    group.enqueue("default", "ping", {})

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    with pytest.raises(RuntimeError):
        current_job.message_id  # noqa: B018 - the attribute access is the test


def test_an_async_handler_runs_to_completion(
    sqs: SQSClient, queue_url: str, group: QueueGroup, logs: list[EventDict]
) -> None:
    steps: list[str] = []

    async def handler(payload: Payload) -> None:
        steps.append(f"start {current_job.job_type}")
        await asyncio.sleep(0.01)
        steps.append("after await")
        await asyncio.sleep(0)
        steps.append("done")

    group.enqueue("default", "ping", {})

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert steps == ["start ping", "after await", "done"]
    assert message_count(sqs, queue_url) == 0
    assert only_event(logs, "job_finished")["outcome"] == "success"


def test_an_async_handler_that_raises_is_retried(
    sqs: SQSClient, queue_url: str, group: QueueGroup, logs: list[EventDict]
) -> None:
    async def handler(payload: Payload) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("async failure")

    group.enqueue("default", "ping", {})

    JobWorker(group, {"ping": handler}, stop_after(1), 0).run()

    assert len(visible_messages(sqs, queue_url)) == 1
    assert only_event(logs, "job_finished")["outcome"] == "retry"


def test_async_handlers_run_one_after_another_on_the_same_worker(
    sqs: SQSClient, queue_url: str, group: QueueGroup
) -> None:
    """The worker thread's event loop serves job after job."""
    done: list[int] = []

    async def handler(payload: Payload) -> None:
        await asyncio.sleep(0)
        done.append(payload["n"])

    for n in range(3):
        group.enqueue("default", "ping", {"n": n})

    JobWorker(group, {"ping": handler}, stop_after(3), 0).run()

    assert sorted(done) == [0, 1, 2]
    assert message_count(sqs, queue_url) == 0
