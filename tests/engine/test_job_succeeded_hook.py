"""``Hooks.job_succeeded``: the handler's return value, isolated like every hook."""

from __future__ import annotations

import typing as t

from flask_sqs_jobs import JobWorker
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import Outcome

from tests.engine.helpers import one_queue_group
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


class Results(Hooks):
    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, object]] = []

    def job_succeeded(self, job: Job, result: object) -> None:
        self.calls.append(("succeeded", result))
        if self.fail:
            raise RuntimeError("broken hook")

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
    ) -> None:
        self.calls.append(("finished", str(outcome)))


def run(sqs: SQSClient, handler: t.Any, hooks: Results) -> str:
    url = create_queue(sqs, "jobs", visibility_timeout=30)
    group = one_queue_group(sqs, url)
    group.enqueue("jobs", "work", {"n": 2})
    JobWorker(
        group, {"work": handler}, stop_after(1), idle_wait_seconds=0, hooks=[hooks]
    ).run()
    return url


def test_the_return_value_reaches_job_succeeded_before_job_finished(
    sqs: SQSClient,
) -> None:
    hooks = Results()
    run(sqs, lambda payload: {"doubled": payload["n"] * 2}, hooks)
    assert hooks.calls == [("succeeded", {"doubled": 4}), ("finished", "success")]


def test_a_failing_job_never_calls_job_succeeded(sqs: SQSClient) -> None:
    hooks = Results()

    def fail(payload: dict[str, int]) -> None:
        raise RuntimeError("no")

    run(sqs, fail, hooks)
    assert hooks.calls == [("finished", "retry")]


def test_a_raising_job_succeeded_hook_is_logged_and_changes_nothing(
    sqs: SQSClient, log_events: list[EventDict]
) -> None:
    hooks = Results(fail=True)
    url = run(sqs, lambda payload: 1, hooks)
    assert hooks.calls == [("succeeded", 1), ("finished", "success")]
    assert message_count(sqs, url) == 0
    failed = [e for e in log_events if e["event"] == "hook_failed"]
    assert [e["hook"] for e in failed] == ["job_succeeded"]
