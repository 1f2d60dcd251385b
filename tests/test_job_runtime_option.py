"""``max_runtime_seconds=`` through the extension: ``jobs.enqueue``,
``jobs.enqueue_many`` dict jobs and ``task.options(...)``."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs import Task

from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def resize(jobs: SQSJobs) -> Task[..., None]:
    @jobs.task(queue="critical", max_runtime_seconds=600)
    def resize(image: str) -> None:
        pass

    return resize


def limits(sqs: SQSClient, url: str) -> dict[str, object]:
    bodies = [json.loads(m["Body"]) for m in visible_messages(sqs, url)]
    return {b["payload"]["image"]: b.get("max_runtime_seconds") for b in bodies}


def test_each_way_to_enqueue_carries_the_jobs_own_limit(
    bare_app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    resize: Task[..., None],
) -> None:
    with bare_app.app_context():
        resize.options(max_runtime_seconds=30).enqueue(image="a")
        resize.options(max_runtime_seconds=45).enqueue_many([{"image": "b"}])
        jobs.enqueue("critical", "resize", {"image": "c"}, max_runtime_seconds=5)
        jobs.enqueue_many(
            "critical",
            [
                {
                    "job_type": "resize",
                    "payload": {"image": "d"},
                    "max_runtime_seconds": 7,
                }
            ],
        )
        resize.enqueue(image="e")

    assert limits(sqs, queue_urls["critical"]) == {
        "a": 30,
        "b": 45,
        "c": 5,
        "d": 7,
        "e": None,
    }


@pytest.mark.parametrize("value", [0, -3, float("nan"), True, "30", 1e9])
def test_a_hostile_limit_is_refused_and_nothing_is_sent(
    bare_app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    resize: Task[..., None],
    value: t.Any,
) -> None:
    with bare_app.app_context():
        with pytest.raises((TypeError, ValueError), match="max_runtime_seconds must"):
            resize.options(max_runtime_seconds=value).enqueue(image="a")
        with pytest.raises((TypeError, ValueError), match="max_runtime_seconds must"):
            resize.options(max_runtime_seconds=value).enqueue_many([{"image": "b"}])
        with pytest.raises(
            (TypeError, ValueError), match=r"jobs\[0\]: max_runtime_seconds must"
        ):
            jobs.enqueue_many(
                "critical", [{"job_type": "resize", "max_runtime_seconds": value}]
            )

    assert message_count(sqs, queue_urls["critical"]) == 0
