"""``Hooks.job_succeeded``, deprecated: still called, isolated like every hook.

Its successor is ``job_finished``'s ``result`` argument (tests/engine/test_hooks.py).
The hooks here are written as for the first release: ``job_finished`` without
the arguments added since, which keeps working.
"""

from __future__ import annotations

import typing as t
import warnings

import pytest
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

    def job_finished(  # type: ignore[override]  # the first release's signature
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
    ) -> None:
        self.calls.append(("finished", str(outcome)))


def results_hooks(*, fail: bool = False) -> Results:
    """Hooks that override the deprecated ``job_succeeded``."""
    with pytest.warns(DeprecationWarning, match=r"job_succeeded.*job_finished"):

        class SucceededResults(Results):
            def job_succeeded(self, job: Job, result: object) -> None:
                self.calls.append(("succeeded", result))
                if self.fail:
                    raise RuntimeError("broken hook")

    return SucceededResults(fail=fail)


def run(sqs: SQSClient, handler: t.Any, hooks: Hooks) -> str:
    url = create_queue(sqs, "jobs", visibility_timeout=30)
    group = one_queue_group(sqs, url)
    group.enqueue("jobs", "work", {"n": 2})
    JobWorker(
        group, {"work": handler}, stop_after(1), idle_wait_seconds=0, hooks=[hooks]
    ).run()
    return url


def test_overriding_job_succeeded_warns_when_the_class_is_defined() -> None:
    with pytest.warns(DeprecationWarning, match="job_succeeded") as caught:

        class Old(Hooks):
            def job_succeeded(self, job: Job, result: object) -> None:
                pass

    assert len(caught) == 1
    message = str(caught[0].message)
    assert "Old overrides Hooks.job_succeeded" in message
    assert "override job_finished and read its result argument" in message
    assert caught[0].filename == __file__


def test_a_hooks_class_without_job_succeeded_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class New(Hooks):
            def job_finished(self, job: Job, *args: t.Any, **kwargs: t.Any) -> None:
                pass


def test_the_return_value_reaches_job_succeeded_before_job_finished(
    sqs: SQSClient,
) -> None:
    hooks = results_hooks()
    run(sqs, lambda payload: {"doubled": payload["n"] * 2}, hooks)
    assert hooks.calls == [("succeeded", {"doubled": 4}), ("finished", "success")]


def test_a_failing_job_never_calls_job_succeeded(sqs: SQSClient) -> None:
    hooks = results_hooks()

    def fail(payload: dict[str, int]) -> None:
        raise RuntimeError("no")

    run(sqs, fail, hooks)
    assert hooks.calls == [("finished", "retry")]


def test_a_raising_job_succeeded_hook_is_logged_and_changes_nothing(
    sqs: SQSClient, log_events: list[EventDict]
) -> None:
    hooks = results_hooks(fail=True)
    url = run(sqs, lambda payload: 1, hooks)
    assert hooks.calls == [("succeeded", 1), ("finished", "success")]
    assert message_count(sqs, url) == 0
    failed = [e for e in log_events if e["event"] == "hook_failed"]
    assert [e["hook"] for e in failed] == ["job_succeeded"]


def test_a_job_finished_of_the_first_release_is_called_without_the_new_arguments(
    sqs: SQSClient, log_events: list[EventDict]
) -> None:
    hooks = Results()
    run(sqs, lambda payload: 1, hooks)
    assert hooks.calls == [("finished", "success")]
    assert not [e for e in log_events if e["event"] == "hook_failed"]
