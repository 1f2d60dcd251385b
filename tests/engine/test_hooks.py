"""The engine's hooks as a worker calls them: order, arguments, worker errors."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import typing as t

import pytest
from botocore.exceptions import ClientError
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import JobHandler
from flask_sqs_jobs.engine import Outcome
from flask_sqs_jobs.engine.model import MultiHooks
from flask_sqs_jobs.engine.model import overrides

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


class Watcher(Hooks):
    """Records each hook call as ``(name, details)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, t.Any]] = []

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[t.Any]:
        return [details for called, details in self.calls if called == name]

    @contextlib.contextmanager
    def _context(self, job: Job) -> t.Iterator[None]:
        self.calls.append(("enter", job.job_type))
        try:
            yield
        finally:
            self.calls.append(("exit", job.job_type))

    def job_context(self, job: Job) -> t.ContextManager[object]:
        return self._context(job)

    def job_received(self, job: Job) -> None:
        self.calls.append(("received", (job.queue, job.message_id, job.receive_count)))

    def job_started(self, job: Job) -> None:
        self.calls.append(("started", job.job_type))

    def job_progress(self, job: Job, fraction: float, message: str | None) -> None:
        self.calls.append(("progress", (fraction, message)))

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
        *,
        result: object = None,
        will_retry: bool = False,
    ) -> None:
        self.calls.append(("finished", (str(outcome), result, will_retry)))

    def worker_error(
        self, queue: str | None, exception: BaseException, kind: str
    ) -> None:
        self.calls.append(("worker_error", (queue, exception, kind)))


def run_one(
    client: SQSClient | SpyClient,
    url: str,
    handlers: dict[str, t.Any],
    *hooks: Hooks,
    cycles: int = 1,
    **options: t.Any,
) -> None:
    boto = client.client if isinstance(client, SpyClient) else client
    group = one_queue_group(boto, url, visibility_timeout=30)
    JobWorker(
        group, handlers, stop_after(cycles), idle_wait_seconds=0, hooks=hooks, **options
    ).run()


@pytest.fixture
def url(sqs: SQSClient) -> str:
    return create_queue(sqs, "jobs", visibility_timeout=30)


def enqueue(sqs: SQSClient, url: str, job_type: str, **options: t.Any) -> str:
    group = one_queue_group(sqs, url)
    return group.enqueue("jobs", job_type, {"n": 1}, **options)


def test_a_job_is_received_inside_its_context_before_it_starts(
    sqs: SQSClient, url: str
) -> None:
    def work(payload: Payload) -> str:
        current_job.set_progress(0.5, "half way")
        return "done"

    message_id = enqueue(sqs, url, "work")
    watcher = Watcher()
    run_one(sqs, url, {"work": work}, watcher)

    assert watcher.names() == [
        "enter",
        "received",
        "started",
        "progress",
        "finished",
        "exit",
    ]
    assert watcher.of("received") == [("jobs", message_id, 1)]
    assert watcher.of("progress") == [(0.5, "half way")]
    assert watcher.of("finished") == [("success", "done", False)]


def test_a_deferred_job_is_received_and_finished_but_never_started(
    sqs: SQSClient, url: str
) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    body = {"job_type": "work", "payload": {}, "run_at": later.isoformat()}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    watcher = Watcher()
    run_one(sqs, url, {"work": lambda payload: None}, watcher)

    assert watcher.names() == ["enter", "received", "finished", "exit"]
    assert watcher.of("finished") == [("deferred", None, False)]


def test_messages_that_are_no_job_of_this_worker_send_no_job_hooks(
    sqs: SQSClient, url: str
) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="not a job")
    enqueue(sqs, url, "unknown")
    watcher = Watcher()
    run_one(sqs, url, {"work": lambda payload: None}, watcher, cycles=2)

    assert watcher.calls == []


@pytest.mark.parametrize(
    ("raised", "outcome", "will_retry"),
    [
        (RuntimeError("try again"), "retry", True),
        (NonRetryableError("give up"), "delete", False),
    ],
)
def test_a_handler_that_raised_has_no_result(
    sqs: SQSClient, url: str, raised: Exception, outcome: str, will_retry: bool
) -> None:
    def fail(payload: Payload) -> None:
        raise raised

    enqueue(sqs, url, "fail")
    watcher = Watcher()
    run_one(sqs, url, {"fail": fail}, watcher)

    assert watcher.of("finished") == [(outcome, None, will_retry)]
    assert watcher.of("worker_error") == []


def test_a_failure_on_the_last_receive_does_not_come_back(sqs: SQSClient) -> None:
    """SQS moves the message to the dead-letter queue when it would come back."""
    dead = create_queue(sqs, "dead")
    url = create_queue(sqs, "jobs", dead_letter_url=dead, max_receive_count=1)
    enqueue(sqs, url, "fail")
    spy = SpyClient(sqs)
    spy.failing["send_message"] = "InternalError"  # the worker's own DLQ move
    watcher = Watcher()

    def fail(payload: Payload) -> None:
        raise RuntimeError("no")

    run_one(spy, url, {"fail": fail}, watcher)

    assert watcher.of("finished") == [("retry", None, False)]
    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, kind) == ("jobs", "settle")
    assert isinstance(error, ClientError)


def test_a_failed_delete_is_a_settle_error_and_the_message_comes_back(
    sqs: SQSClient, url: str
) -> None:
    enqueue(sqs, url, "work")
    spy = SpyClient(sqs)
    spy.failing["delete_message"] = "InternalError"
    watcher = Watcher()
    run_one(spy, url, {"work": lambda payload: 7}, watcher)

    assert watcher.of("finished") == [("delete_failed", 7, True)]
    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, kind) == ("jobs", "settle")
    assert (error.operation, error.code) == ("DeleteMessage", "InternalError")
    assert "DeleteMessage failed: InternalError" in str(error)


def test_a_failed_receive_is_a_receive_error(sqs: SQSClient, url: str) -> None:
    spy = SpyClient(sqs)
    spy.failing["receive_message"] = "AWS.SimpleQueueService.NonExistentQueue"
    watcher = Watcher()
    run_one(spy, url, {"work": lambda payload: None}, watcher)

    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, kind) == ("jobs", "receive")
    assert isinstance(error, ClientError)


class Broken(Hooks):
    """Raises in ``job_started``; records what ``worker_error`` hears."""

    def __init__(self) -> None:
        self.errors: list[tuple[str | None, str, str]] = []

    def job_started(self, job: Job) -> None:
        raise RuntimeError("broken hook")

    def worker_error(
        self, queue: str | None, exception: BaseException, kind: str
    ) -> None:
        self.errors.append((queue, str(exception), kind))


def test_a_raising_hook_is_a_hook_error_for_every_hook_and_changes_nothing(
    sqs: SQSClient, url: str, log_events: list[EventDict]
) -> None:
    enqueue(sqs, url, "work")
    broken, watcher = Broken(), Watcher()
    run_one(sqs, url, {"work": lambda payload: 1}, broken, watcher)

    assert watcher.of("finished") == [("success", 1, False)]
    assert message_count(sqs, url) == 0
    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, str(error), kind) == ("jobs", "broken hook", "hook")
    assert broken.errors == [("jobs", "broken hook", "hook")]
    assert [e["hook"] for e in events(log_events, "hook_failed")] == ["job_started"]


def test_a_job_context_that_fails_is_a_hook_error_and_a_retry(
    sqs: SQSClient, url: str
) -> None:
    class NoContext(Watcher):
        def job_context(self, job: Job) -> t.ContextManager[object]:
            raise RuntimeError("no context")

    enqueue(sqs, url, "work")
    watcher = NoContext()
    run_one(sqs, url, {"work": lambda payload: 1}, watcher)

    assert watcher.names() == ["worker_error", "received", "finished"]
    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, str(error), kind) == ("jobs", "no context", "hook")
    assert watcher.of("finished") == [("retry", None, True)]


def test_a_raising_worker_error_hook_is_only_logged(
    sqs: SQSClient, url: str, log_events: list[EventDict]
) -> None:
    class AlsoBroken(Broken):
        def worker_error(
            self, queue: str | None, exception: BaseException, kind: str
        ) -> None:
            super().worker_error(queue, exception, kind)
            raise RuntimeError("broken too")

    enqueue(sqs, url, "work")
    broken = AlsoBroken()
    run_one(sqs, url, {"work": lambda payload: 1}, broken)

    assert broken.errors == [("jobs", "broken hook", "hook")]
    assert [e["hook"] for e in events(log_events, "hook_failed")] == [
        "job_started",
        "worker_error",
    ]
    assert message_count(sqs, url) == 0


class BrokenKeys:
    """Idempotency keys whose store is down."""

    def claim(self, key: str, **kwargs: t.Any) -> t.NoReturn:
        raise ConnectionError("store down")

    def renew(self, key: str, token: str, lease_seconds: float) -> bool:
        raise AssertionError("never claimed")

    def complete(self, key: str, token: str, **kwargs: t.Any) -> None:
        raise AssertionError("never claimed")

    def relinquish(self, key: str, token: str) -> None:
        raise AssertionError("never claimed")


def test_a_failing_store_is_a_store_error_and_a_retry(sqs: SQSClient, url: str) -> None:
    enqueue(sqs, url, "work")
    ran: list[Payload] = []
    watcher = Watcher()
    run_one(
        sqs,
        url,
        {"work": JobHandler(ran.append, idempotent=True)},
        watcher,
        idempotency_keys=t.cast(t.Any, BrokenKeys()),
    )

    assert ran == []
    [(queue, error, kind)] = watcher.of("worker_error")
    assert (queue, str(error), kind) == ("jobs", "store down", "store")
    assert watcher.of("finished") == [("retry", None, True)]


def test_a_hook_error_reaches_the_groups_hooks_and_the_workers_alike(
    sqs: SQSClient, url: str
) -> None:
    """The queue group's hooks and the worker's extra hooks hear the same errors."""
    group_watcher, broken = Watcher(), Broken()
    queue = SqsQueue(url, boto_client=sqs, visibility_timeout=30)
    group = QueueGroup({"jobs": {"queue": queue}}, hooks=group_watcher)
    group.enqueue("jobs", "work", {})
    JobWorker(
        group,
        {"work": lambda payload: None},
        stop_after(1),
        idle_wait_seconds=0,
        hooks=[broken],
    ).run()

    [(queue_name, error, kind)] = group_watcher.of("worker_error")
    assert (queue_name, str(error), kind) == ("jobs", "broken hook", "hook")


def test_groups_of_hooks_flatten_and_call_what_each_implements() -> None:
    first, second, plain = Watcher(), Watcher(), Hooks()
    started: list[str] = []
    by_instance = Hooks()
    by_instance.job_started = lambda job: started.append(job.job_type)  # type: ignore[method-assign]
    hooks = MultiHooks([MultiHooks([first, plain]), second, by_instance])
    job = Job(job_type="work", payload={}, queue="jobs")

    hooks.job_started(job)
    with hooks.job_context(job):
        pass

    assert hooks.hooks == (first, plain, second, by_instance)
    assert first.names() == second.names() == ["started", "enter", "exit"]
    assert started == ["work"]


def test_a_moment_nobody_implements_is_not_called() -> None:
    hooks = MultiHooks([Hooks(), Hooks()])
    assert not overrides(hooks, "job_progress")
    assert isinstance(
        hooks.job_context(Job("work", {}, "jobs")), contextlib.nullcontext
    )
    assert overrides(MultiHooks([Watcher()]), "job_progress")
