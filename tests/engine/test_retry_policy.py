"""Per-job-type retry policies (``Retry``), driven through JobWorker.run()."""

from __future__ import annotations

import datetime as dt
import json
import math
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import RetryJob
from flask_sqs_jobs.engine import JobHandler
from flask_sqs_jobs.engine import Retry

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


def fail(payload: Payload) -> None:
    raise ConnectionError("upstream down")


def run_once(
    client: SQSClient, url: str, handler: JobHandler, **options: t.Any
) -> None:
    group = one_queue_group(client, url, visibility_timeout=0, **options)
    JobWorker(group, {"sync": handler}, stop_after(1), idle_wait_seconds=0).run()


def receive_without_running(client: SQSClient, url: str, times: int) -> None:
    """Use up ``times`` receives, so the worker's is attempt ``times + 1``."""
    for _ in range(times):
        client.receive_message(QueueUrl=url, VisibilityTimeout=0)


class TestBackoff:
    @pytest.mark.parametrize(("attempt", "wait"), [(1, 10), (2, 20), (4, 80), (9, 300)])
    def test_the_wait_doubles_per_attempt_up_to_the_cap(
        self, attempt: int, wait: int
    ) -> None:
        policy = Retry(backoff_seconds=10, max_backoff_seconds=300, jitter=False)

        assert policy.delay(attempt) == wait

    @pytest.mark.usefixtures("seeded_random")
    def test_jitter_draws_between_half_and_all_of_the_wait(self) -> None:
        policy = Retry(backoff_seconds=10, max_backoff_seconds=300)

        draws = {policy.delay(3) for _ in range(200)}

        assert min(draws) >= 20
        assert max(draws) <= 40
        assert len(draws) > 10

    def test_a_fractional_wait_is_at_least_one_second(self) -> None:
        assert Retry(backoff_seconds=0.1, jitter=False).delay(1) == 1
        assert Retry(backoff_seconds=0.1).delay(1) == 1

    def test_a_huge_attempt_number_stays_within_the_sqs_maximum(self) -> None:
        policy = Retry(backoff_seconds=1e300, max_backoff_seconds=1e308)

        assert 21_600 <= policy.delay(10**9) <= 43_200

    @pytest.mark.parametrize("earlier_receives", [0, 2])
    def test_the_policy_overrides_the_queue_backoff(
        self, sqs: SQSClient, queue_url: str, earlier_receives: int
    ) -> None:
        spy = SpyClient(sqs)
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})
        receive_without_running(sqs, queue_url, earlier_receives)
        policy = Retry(backoff_seconds=10, jitter=False)

        run_once(
            spy.client,
            queue_url,
            JobHandler(fail, retry=policy),
            retry_backoff_seconds=1000,
        )

        assert visibility_changes(spy) == [10 * 2**earlier_receives]
        assert visible_messages(sqs, queue_url) == []

    def test_retry_job_keeps_its_own_delay_and_retries_whatever_retry_on_says(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        spy = SpyClient(sqs)
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})

        def later(payload: Payload) -> None:
            raise RetryJob(delay_seconds=7)

        policy = Retry(backoff_seconds=100, retry_on=(KeyError,))
        run_once(spy.client, queue_url, JobHandler(later, retry=policy))

        assert visibility_changes(spy) == [7]
        assert only_event(logs, "job_finished")["outcome"] == "retry"


class TestRetryOn:
    def test_an_exception_not_in_retry_on_deletes_the_job(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})

        def broken(payload: Payload) -> None:
            raise KeyError("no such field")

        policy = Retry(retry_on=(ConnectionError,))
        run_once(sqs, queue_url, JobHandler(broken, retry=policy))

        assert message_count(sqs, queue_url) == 0
        finished = only_event(logs, "job_finished")
        assert finished["outcome"] == "delete"
        assert finished["reason"] == "not_retryable"
        assert finished["error_type"] == "KeyError"
        assert not [e for e in logs if e["event"] == "job_retrying"]

    def test_a_subclass_of_a_listed_exception_retries(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})

        def refused(payload: Payload) -> None:
            raise ConnectionRefusedError("refused")

        policy = Retry(retry_on=(ConnectionError,), backoff_seconds=5)
        run_once(sqs, queue_url, JobHandler(refused, retry=policy))

        assert message_count(sqs, queue_url) == 1
        assert only_event(logs, "job_finished")["outcome"] == "retry"


class TestExhausted:
    @pytest.fixture
    def dlq_url(self, sqs: SQSClient) -> str:
        return create_queue(sqs, "jobs-dlq")

    def test_the_last_attempt_dead_letters_even_below_max_receive_count(
        self, sqs: SQSClient, dlq_url: str, logs: list[EventDict]
    ) -> None:
        url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=10)
        one_queue_group(sqs, url).enqueue("jobs", "sync", {"n": 1})
        receive_without_running(sqs, url, 2)

        run_once(sqs, url, JobHandler(fail, retry=Retry(max_attempts=3)))

        assert message_count(sqs, url) == 0
        (dead,) = visible_messages(sqs, dlq_url)
        reason = json.loads(dead["MessageAttributes"]["dead_letter"]["StringValue"])
        assert reason["error_type"] == "ConnectionError"
        assert reason["error"] == "upstream down"
        assert reason["receive_count"] == 3
        assert only_event(logs, "job_finished")["outcome"] == "dead_lettered"

    def test_without_a_dlq_the_last_attempt_deletes_and_says_so(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})
        receive_without_running(sqs, queue_url, 1)

        run_once(sqs, queue_url, JobHandler(fail, retry=Retry(max_attempts=2)))

        assert message_count(sqs, queue_url) == 0
        exhausted = only_event(logs, "retries_exhausted")
        assert exhausted["attempt"] == 2
        assert exhausted["max_attempts"] == 2
        assert exhausted["error_type"] == "ConnectionError"
        assert exhausted["logger"] == "flask_sqs_jobs.job"
        finished = only_event(logs, "job_finished")
        assert finished["outcome"] == "delete"
        assert finished["reason"] == "retries_exhausted"

    def test_a_dead_letter_that_cannot_be_sent_keeps_the_job_for_another_try(
        self, sqs: SQSClient, dlq_url: str, logs: list[EventDict]
    ) -> None:
        url = create_queue(sqs, "jobs", dead_letter_url=dlq_url, max_receive_count=10)
        one_queue_group(sqs, url).enqueue("jobs", "sync", {})
        spy = SpyClient(sqs)
        spy.failing["send_message"] = "AccessDenied"

        run_once(spy.client, url, JobHandler(fail, retry=Retry(max_attempts=1)))

        assert message_count(sqs, url) == 1
        assert message_count(sqs, dlq_url) == 0
        assert only_event(logs, "job_finished")["outcome"] == "retry"


class TestAttempts:
    @pytest.mark.parametrize(
        ("policy", "max_receive_count", "expected"),
        [(Retry(max_attempts=4), None, 4), (Retry(max_attempts=4), 2, 2), (None, 6, 6)],
    )
    def test_the_handler_sees_its_attempt_and_how_many_it_gets(
        self,
        sqs: SQSClient,
        policy: Retry | None,
        max_receive_count: int | None,
        expected: int,
    ) -> None:
        dlq = create_queue(sqs, "jobs-dlq") if max_receive_count else None
        url = create_queue(
            sqs, "jobs", dead_letter_url=dlq, max_receive_count=max_receive_count or 1
        )
        one_queue_group(sqs, url).enqueue("jobs", "sync", {})
        receive_without_running(sqs, url, 1)
        seen: list[tuple[int | None, int | None]] = []

        def look(payload: Payload) -> None:
            seen.append((current_job.attempt, current_job.max_attempts))

        run_once(sqs, url, JobHandler(look, retry=policy))

        assert seen == [(2, expected)]

    def test_without_any_limit_max_attempts_is_none(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})
        seen: list[tuple[int | None, int | None]] = []

        def look(payload: Payload) -> None:
            seen.append((current_job.attempt, current_job.max_attempts))

        run_once(sqs, queue_url, JobHandler(look))

        assert seen == [(1, None)]


class TestRetryingLogLine:
    def test_job_retrying_says_when_the_next_attempt_is_due(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})
        policy = Retry(max_attempts=3, backoff_seconds=60, jitter=False)
        before = dt.datetime.now(dt.UTC)

        run_once(sqs, queue_url, JobHandler(fail, retry=policy))

        retrying = only_event(logs, "job_retrying")
        assert retrying["logger"] == "flask_sqs_jobs.job"
        assert retrying["attempt"] == 1
        assert retrying["max_attempts"] == 3
        assert retrying["retry_in_seconds"] == 60
        due = dt.datetime.fromisoformat(retrying["next_attempt_at"])
        assert due.tzinfo is not None
        waited = (due - before).total_seconds()
        assert 60 <= math.ceil(waited) <= 62

    def test_without_a_delay_job_retrying_only_counts_attempts(
        self, sqs: SQSClient, queue_url: str, logs: list[EventDict]
    ) -> None:
        one_queue_group(sqs, queue_url).enqueue("jobs", "sync", {})

        run_once(sqs, queue_url, JobHandler(fail))

        retrying = only_event(logs, "job_retrying")
        assert (retrying["attempt"], retrying["max_attempts"]) == (1, None)
        assert "next_attempt_at" not in retrying


class TestValidation:
    @pytest.mark.parametrize(
        ("arguments", "error", "match"),
        [
            ({"max_attempts": 0}, ValueError, "at least 1"),
            ({"max_attempts": 2.5}, TypeError, "max_attempts must be an int"),
            ({"max_attempts": True}, TypeError, "max_attempts must be an int"),
            ({"backoff_seconds": 0}, ValueError, "backoff_seconds must be a positive"),
            ({"backoff_seconds": -1}, ValueError, "backoff_seconds"),
            ({"backoff_seconds": math.nan}, ValueError, "finite"),
            ({"max_backoff_seconds": math.inf}, ValueError, "max_backoff_seconds"),
            ({"backoff_seconds": "30"}, ValueError, "backoff_seconds"),
            ({"backoff_seconds": 9, "max_backoff_seconds": 3}, ValueError, "at least"),
            ({"retry_on": ValueError}, TypeError, "tuple of Exception subclasses"),
            ({"retry_on": [ValueError]}, TypeError, "tuple"),
            ({"retry_on": (ValueError, "x")}, TypeError, "retry_on"),
            ({"retry_on": (KeyboardInterrupt,)}, TypeError, "retry_on"),
            ({"jitter": "yes"}, TypeError, "jitter must be True or False"),
        ],
    )
    def test_bad_arguments_are_refused_with_what_was_wrong(
        self, arguments: dict[str, t.Any], error: type[Exception], match: str
    ) -> None:
        with pytest.raises(error, match=match):
            Retry(**arguments)

    def test_a_handler_refuses_a_retry_that_is_not_a_retry(self) -> None:
        with pytest.raises(TypeError, match="retry must be a Retry"):
            JobHandler(fail, retry=t.cast(t.Any, {"max_attempts": 3}))
