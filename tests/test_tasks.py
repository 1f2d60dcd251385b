"""@jobs.task: the function, its typed enqueue methods and the handler it registers."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import EnqueuedJob
from flask_sqs_jobs import Retry
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs import Task
from flask_sqs_jobs.testing import work_off

from tests.flask_helpers import only_sent_job
from tests.flask_helpers import sent_jobs
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def drain(client: SQSClient, url: str) -> list[t.Any]:
    """Receive every message on the queue, hiding each one received."""
    received: list[t.Any] = []
    while batch := client.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60
    ).get("Messages"):
        received.extend(batch)
    return received


@pytest.fixture
def sent(jobs: SQSJobs) -> list[dict[str, t.Any]]:
    """What ``send_welcome`` ran with, in the worker."""
    return []


@pytest.fixture
def send_welcome(jobs: SQSJobs, sent: list[dict[str, t.Any]]) -> Task[..., str]:
    @jobs.task(queue="critical")
    def send_welcome(user_id: int, template: str = "welcome") -> str:
        sent.append({"user_id": user_id, "template": template})
        return f"sent {template} to {user_id}"

    return send_welcome


class TestTheFunction:
    def test_calling_the_task_calls_the_function(
        self, send_welcome: Task[..., str], sent: list[dict[str, t.Any]]
    ) -> None:
        assert send_welcome(user_id=1) == "sent welcome to 1"
        assert send_welcome(2, "bye") == "sent bye to 2"
        assert sent == [
            {"user_id": 1, "template": "welcome"},
            {"user_id": 2, "template": "bye"},
        ]

    def test_the_task_keeps_the_function_s_name_and_registers_that_job_type(
        self, jobs: SQSJobs, send_welcome: Task[..., str]
    ) -> None:
        assert send_welcome.__name__ == "send_welcome"
        assert send_welcome.name == "send_welcome"
        assert send_welcome.queue == "critical"
        assert set(jobs.handlers) == {"send_welcome"}

    def test_a_bare_decorator_takes_every_default(self, jobs: SQSJobs) -> None:
        @jobs.task
        def ping() -> None:
            pass

        assert (ping.name, ping.queue, ping.retry) == ("ping", "default", None)

    def test_name_and_settings_go_to_the_handler(self, jobs: SQSJobs) -> None:
        policy = Retry(max_attempts=2)

        @jobs.task(name="billing.charge", retry=policy, max_runtime_seconds=60)
        def charge(order_id: int) -> None:
            pass

        handler = jobs.handlers["billing.charge"]
        assert (handler.retry, handler.max_runtime_seconds) == (policy, 60)
        assert charge.name == "billing.charge"

    def test_idempotent_reaches_the_handler(self, jobs: SQSJobs) -> None:
        @jobs.task(idempotent=True)
        def charge(order_id: int) -> None:
            pass

        assert charge.idempotent is True
        assert jobs.handlers["charge"].idempotent is True

    def test_the_job_type_cannot_be_taken_twice(self, jobs: SQSJobs) -> None:
        @jobs.task
        def report() -> None:
            pass

        with pytest.raises(ValueError, match="'report' already has a handler"):

            @jobs.task(name="report")
            def another() -> None:
                pass

    @pytest.mark.parametrize(
        ("source", "match"),
        [
            ("def f(a, /): pass", "parameter 'a' cannot be passed by keyword"),
            ("def f(*items): pass", "parameter 'items' cannot be passed by keyword"),
        ],
    )
    def test_a_function_whose_arguments_cannot_be_keywords_is_refused(
        self, jobs: SQSJobs, source: str, match: str
    ) -> None:
        namespace: dict[str, t.Any] = {}
        exec(source, namespace)

        with pytest.raises(TypeError, match=match):
            jobs.task(namespace["f"])
        assert jobs.handlers == {}

    @pytest.mark.parametrize(
        ("options", "error", "match"),
        [
            ({"queue": ""}, ValueError, "queue must be a non-empty str"),
            ({"name": ""}, ValueError, "name must be a non-empty str"),
            ({"idempotent": "yes"}, TypeError, "idempotent must be True or False"),
            ({"retry": {"max_attempts": 3}}, TypeError, "retry must be a Retry"),
            ({"max_runtime_seconds": -1}, ValueError, "max_runtime_seconds"),
        ],
    )
    def test_bad_settings_are_refused(
        self,
        jobs: SQSJobs,
        options: dict[str, t.Any],
        error: type[Exception],
        match: str,
    ) -> None:
        def f() -> None:
            pass

        with pytest.raises(error, match=match):
            jobs.task(**options)(f)
        assert jobs.handlers == {}


class TestEnqueue:
    def test_the_keyword_arguments_become_the_payload(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context():
            enqueued = send_welcome.enqueue(user_id=42)

        job = only_sent_job(sqs, queue_urls["critical"])
        assert (job.job_type, job.payload) == ("send_welcome", {"user_id": 42})
        assert isinstance(enqueued, EnqueuedJob)
        assert enqueued.message_id == job.message_id
        (message,) = sqs.receive_message(QueueUrl=queue_urls["critical"])["Messages"]
        assert json.loads(message["Body"])["job_id"] == enqueued.job_id

    def test_the_worker_calls_the_function_with_the_payload_s_keys(
        self,
        bare_app: Flask,
        send_welcome: Task[..., str],
        sent: list[dict[str, t.Any]],
    ) -> None:
        with bare_app.app_context():
            send_welcome.enqueue(user_id=7, template="promo")
        finished = work_off(bare_app)

        assert sent == [{"user_id": 7, "template": "promo"}]
        assert [f.outcome.value for f in finished] == ["success"]

    def test_an_async_function_runs_to_completion(
        self, bare_app: Flask, jobs: SQSJobs
    ) -> None:
        seen: list[tuple[int, str]] = []

        @jobs.task
        async def crawl(page: int) -> None:
            await asyncio.sleep(0)
            seen.append((page, current_job.job_type))

        with bare_app.app_context():
            crawl.enqueue(page=3)
        work_off(bare_app)

        assert seen == [(3, "crawl")]

    @pytest.mark.parametrize(
        ("args", "kwargs", "match"),
        [
            ((42,), {}, "keyword arguments only"),
            ((), {}, "missing a required argument: 'user_id'"),
            ((), {"user_id": 1, "colour": "red"}, "unexpected keyword argument"),
            ((), {"user_id": object()}, "must be JSON-serialisable"),
            ((), {"user_id": {1, 2}}, "must be JSON-serialisable"),
        ],
    )
    def test_bad_arguments_raise_type_error_and_send_nothing(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        match: str,
    ) -> None:
        with bare_app.app_context(), pytest.raises(TypeError, match=match) as info:
            send_welcome.enqueue(*args, **kwargs)

        assert "send_welcome" in str(info.value)
        assert message_count(sqs, queue_urls["critical"]) == 0

    def test_a_non_finite_float_is_refused(
        self, bare_app: Flask, send_welcome: Task[..., str]
    ) -> None:
        with bare_app.app_context(), pytest.raises(ValueError, match="JSON"):
            send_welcome.enqueue(user_id=float("nan"))

    def test_arguments_nested_too_deeply_are_refused(
        self, bare_app: Flask, send_welcome: Task[..., str]
    ) -> None:
        nested: list[t.Any] = []
        for _ in range(100_000):
            nested = [nested]
        with bare_app.app_context(), pytest.raises(ValueError, match="too deeply"):
            send_welcome.enqueue(user_id=1, template=t.cast(str, nested))

    def test_arguments_too_large_for_a_message_are_refused(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context(), pytest.raises(ValueError, match="bytes"):
            send_welcome.enqueue(user_id=1, template="x" * 2_000_000)

        assert message_count(sqs, queue_urls["critical"]) == 0

    def test_a_payload_that_does_not_fit_the_function_is_not_retried(
        self, bare_app: Flask, jobs: SQSJobs, send_welcome: Task[..., str]
    ) -> None:
        """Another producer's payload: the function would never accept it."""
        with bare_app.app_context():
            jobs.enqueue("critical", "send_welcome", {"userid": 1})
        (finished,) = work_off(bare_app)

        assert finished.outcome.value == "delete"
        assert "does not fit task 'send_welcome'" in str(finished.exception)


class TestOptions:
    def test_options_reach_the_message(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context():
            enqueued = (
                send_welcome.options(queue="default", job_id="welcome-42")
                .options(correlation_fields={"tenant": "t1"}, delay_seconds=0)
                .enqueue(user_id=42)
            )

        assert enqueued.job_id == "welcome-42"
        assert message_count(sqs, queue_urls["critical"]) == 0
        (job,) = sent_jobs(sqs, queue_urls["default"])
        assert job.payload == {"user_id": 42}
        assert job.correlation_fields == {"tenant": "t1"}

    def test_a_delay_keeps_the_job_hidden(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context():
            send_welcome.options(delay_seconds=600).enqueue(user_id=1)

        assert sent_jobs(sqs, queue_urls["critical"]) == []
        assert message_count(sqs, queue_urls["critical"]) == 1

    def test_every_option_is_passed_to_jobs_enqueue(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        send_welcome: Task[..., str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        calls: list[dict[str, t.Any]] = []

        def spy(*args: t.Any, **kwargs: t.Any) -> str:
            calls.append(kwargs)
            return "message-1"

        monkeypatch.setattr(jobs, "enqueue", spy)
        run_at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)
        with bare_app.app_context():
            send_welcome.options(
                run_at=run_at, message_group_id="g", message_deduplication_id="d"
            ).enqueue(user_id=1)

        (call,) = calls
        assert call["run_at"] == run_at
        assert (call["message_group_id"], call["message_deduplication_id"]) == (
            "g",
            "d",
        )

    def test_bad_options_are_refused_before_sending(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context(), pytest.raises(ValueError, match="job_id"):
            send_welcome.options(job_id="has spaces").enqueue(user_id=1)

        assert message_count(sqs, queue_urls["critical"]) == 0

    def test_the_bound_options_leave_the_task_unchanged(
        self, send_welcome: Task[..., str]
    ) -> None:
        bound = send_welcome.options(queue="default")

        assert "default" in repr(bound)
        assert send_welcome.queue == "critical"

    def test_session_goes_to_the_outbox_and_the_message_id_is_not_known_yet(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        send_welcome: Task[..., str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        calls: list[dict[str, t.Any]] = []

        def outbox_enqueue(*args: t.Any, **kwargs: t.Any) -> str:
            calls.append({"args": args, **kwargs})
            return str(kwargs["job_id"])

        monkeypatch.setattr(jobs, "enqueue", outbox_enqueue)
        session = object()
        with bare_app.app_context():
            enqueued = send_welcome.options(session=session).enqueue(user_id=5)

        (call,) = calls
        assert call["session"] is session
        assert call["args"] == ("critical", "send_welcome", {"user_id": 5})
        assert enqueued.message_id is None
        assert enqueued.job_id == call["job_id"]


class TestEnqueueMany:
    def test_each_call_becomes_one_job(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context():
            enqueued = send_welcome.enqueue_many([{"user_id": n} for n in range(12)])

        received = drain(sqs, queue_urls["critical"])
        bodies = [json.loads(m["Body"]) for m in received]
        assert sorted(body["payload"]["user_id"] for body in bodies) == list(range(12))
        assert {e.message_id for e in enqueued} == {m["MessageId"] for m in received}
        assert {e.job_id for e in enqueued} == {body["job_id"] for body in bodies}

    def test_one_bad_call_sends_nothing_and_names_its_index(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        calls: list[t.Any] = [{"user_id": 1}, {"user_id": 2, "x": 1}]
        with bare_app.app_context(), pytest.raises(TypeError, match=r"calls\[1\]"):
            send_welcome.enqueue_many(calls)
        with bare_app.app_context(), pytest.raises(TypeError, match=r"calls\[0\]"):
            send_welcome.enqueue_many([[("user_id", 1)]])  # type: ignore[list-item]

        assert message_count(sqs, queue_urls["critical"]) == 0

    @pytest.mark.parametrize("option", ["job_id", "message_deduplication_id"])
    def test_an_option_naming_one_job_is_refused(
        self, bare_app: Flask, send_welcome: Task[..., str], option: str
    ) -> None:
        options: dict[str, t.Any] = {option: "one"}
        bound = send_welcome.options(**options)
        with bare_app.app_context(), pytest.raises(ValueError, match=option):
            bound.enqueue_many([{"user_id": 1}])


class TestAenqueue:
    def test_aenqueue_sends_from_a_coroutine_with_the_app_context(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        async def view() -> EnqueuedJob:
            return await send_welcome.options(queue="default").aenqueue(user_id=9)

        with bare_app.app_context():
            enqueued = asyncio.run(view())

        (job,) = sent_jobs(sqs, queue_urls["default"])
        assert (job.payload, job.message_id) == ({"user_id": 9}, enqueued.message_id)

    def test_aenqueue_many_sends_every_job_from_a_coroutine(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        async def view() -> list[EnqueuedJob]:
            sender = send_welcome.options(queue="default")
            return await sender.aenqueue_many([{"user_id": 1}, {"user_id": 2}])

        with bare_app.app_context():
            enqueued = asyncio.run(view())

        sent = sent_jobs(sqs, queue_urls["default"])
        assert sorted(job.payload["user_id"] for job in sent) == [1, 2]
        assert {job.message_id for job in sent} == {e.message_id for e in enqueued}

    def test_jobs_aenqueue_many_sends_from_a_coroutine(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        async def view() -> list[str]:
            return await jobs.aenqueue_many(
                "default", [(send_welcome.name, {"user_id": 3})]
            )

        with bare_app.app_context():
            (message_id,) = asyncio.run(view())

        (job,) = sent_jobs(sqs, queue_urls["default"])
        assert (job.payload, job.message_id) == ({"user_id": 3}, message_id)

    def test_aenqueue_many_checks_every_call_before_sending(
        self,
        bare_app: Flask,
        sqs: SQSClient,
        queue_urls: dict[str, str],
        send_welcome: Task[..., str],
    ) -> None:
        with bare_app.app_context(), pytest.raises(TypeError, match=r"calls\[1\]"):
            asyncio.run(
                send_welcome.options(queue="default").aenqueue_many(
                    [{"user_id": 1}, {}]
                )
            )
        assert sent_jobs(sqs, queue_urls["default"]) == []

    def test_aenqueue_checks_arguments_too(
        self, bare_app: Flask, send_welcome: Task[..., str]
    ) -> None:
        with bare_app.app_context(), pytest.raises(TypeError, match="missing"):
            asyncio.run(send_welcome.aenqueue())


class TestRecord:
    def test_without_a_store_record_names_the_setting(
        self, bare_app: Flask, send_welcome: Task[..., str]
    ) -> None:
        with bare_app.app_context():
            enqueued = send_welcome.enqueue(user_id=1)
            with pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
                enqueued.record()

    def test_with_a_store_record_looks_the_job_up(
        self,
        make_app: t.Any,
        app_config: dict[str, t.Any],
        jobs: SQSJobs,
        send_welcome: Task[..., str],
        tmp_path: t.Any,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        app = make_app(
            {**app_config, "SQS_JOBS_STORE_URL": f"sqlite:///{tmp_path}/j.db"}
        )
        looked_up: list[str] = []

        def get_job(job_id: str) -> str:
            looked_up.append(job_id)
            return f"record of {job_id}"

        monkeypatch.setattr(jobs, "get_job", get_job, raising=False)
        with app.app_context():
            enqueued = send_welcome.enqueue(user_id=1)
            assert enqueued.record() == f"record of {enqueued.job_id}"
        assert looked_up == [enqueued.job_id]


class TestHandlerRetry:
    def test_a_plain_handler_takes_a_retry_policy_too(
        self, bare_app: Flask, jobs: SQSJobs
    ) -> None:
        seen: list[tuple[int | None, int | None]] = []
        policy = Retry(max_attempts=4, retry_on=(ConnectionError,))

        @jobs.handler("sync", retry=policy)
        def sync(payload: dict[str, t.Any]) -> None:
            seen.append((current_job.attempt, current_job.max_attempts))
            raise KeyError("not retryable under this policy")

        with bare_app.app_context():
            jobs.enqueue("default", "sync")
        (finished,) = work_off(bare_app)

        assert jobs.handlers["sync"].retry is policy
        assert seen == [(1, 4)]
        assert finished.outcome.value == "delete"
