"""Unique jobs: one key, one job queued or running, on SQLite and PostgreSQL."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import DuplicateJobError
from flask_sqs_jobs import SQSJobs

from tests.idempotency.conftest import RunWorker
from tests.unique.polling import enqueue_once_free

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


def report_task(jobs: SQSJobs) -> t.Any:
    """A task ``report(day)`` that does nothing."""

    @jobs.task()
    def report(day: int) -> None:
        pass

    return report


def messages_in(sqs: SQSClient, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def test_a_second_enqueue_with_the_key_sends_nothing_and_names_the_first(
    store_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_url: str
) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context():
        first = jobs.enqueue("default", "report", {"day": 1}, unique=True, job_id="j-1")
        second = jobs.enqueue("default", "report", {"day": 1}, unique=True)
        other = jobs.enqueue("default", "report", {"day": 2}, unique=True)

    assert second == "j-1"
    assert first not in ("j-1", other)
    assert messages_in(sqs, queue_url) == 2


def test_equal_payloads_in_another_key_order_share_the_key(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context():
        jobs.enqueue("default", "report", {"a": 1, "b": 2}, unique=True, job_id="j-1")
        again = jobs.enqueue("default", "report", {"b": 2, "a": 1}, unique=True)
    assert again == "j-1"


def test_on_duplicate_raise_names_the_holder(store_app: Flask, jobs: SQSJobs) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context():
        jobs.enqueue("default", "report", {}, unique_key="daily", job_id="j-1")
        with pytest.raises(DuplicateJobError) as raised:
            jobs.enqueue(
                "default", "report", {"x": 1}, unique_key="daily", on_duplicate="raise"
            )
    assert raised.value.job_id == "j-1"
    assert "j-1" in str(raised.value)


def test_a_task_returns_the_holder_as_a_duplicate(
    store_app: Flask, jobs: SQSJobs
) -> None:
    report = report_task(jobs)
    with store_app.app_context():
        first = report.options(unique=True).enqueue(day=1)
        again = report.options(unique=True).enqueue(day=1)
        with pytest.raises(DuplicateJobError):
            report.options(unique=True, on_duplicate="raise").enqueue(day=1)

    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.job_id == first.job_id
    assert again.message_id is None


def test_the_key_is_free_once_unique_for_ran_out(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("report")(lambda payload: None)
    store = jobs.store(store_app)
    with store_app.app_context():
        jobs.enqueue(
            "default", "report", {}, unique_key="k", unique_for=60, job_id="j-1"
        )
        # The key's time runs out: move its expiry into the past.
        engine = t.cast(t.Any, store).engine
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE sqs_jobs_unique_keys SET expires_at = created_at")
            )
        again = jobs.enqueue("default", "report", {}, unique_key="k", job_id="j-2")
        third = jobs.enqueue("default", "report", {}, unique_key="k")
    assert again != "j-1"
    assert third == "j-2"


def test_a_rolled_back_session_holds_no_key(store_app: Flask, jobs: SQSJobs) -> None:
    jobs.handler("report")(lambda payload: None)
    store = t.cast(t.Any, jobs.store(store_app))
    with store_app.app_context():
        with store.session() as session:
            jobs.enqueue(
                "default", "report", {}, unique_key="k", job_id="j-1", session=session
            )
            session.rollback()
        with store.session() as session:
            returned = jobs.enqueue(
                "default", "report", {}, unique_key="k", job_id="j-2", session=session
            )
            session.commit()
        again = jobs.enqueue("default", "report", {}, unique_key="k")
    assert returned == "j-2"
    assert again == "j-2"


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"unique": "yes"}, TypeError, "True or False"),
        ({"unique_key": ""}, TypeError, "non-empty"),
        ({"unique": True, "unique_for": 0}, ValueError, "above 0"),
        (
            {"unique": True, "unique_until": "done"},
            ValueError,
            "'started' or 'finished'",
        ),
        ({"unique": True, "on_duplicate": "ignore"}, ValueError, "'skip' or 'raise'"),
        ({"unique_for": 60}, ValueError, "add unique=True"),
        ({"debounce": 5}, ValueError, "needs unique_key"),
    ],
)
def test_bad_unique_options_are_refused(
    store_app: Flask,
    jobs: SQSJobs,
    options: dict[str, t.Any],
    error: type[Exception],
    message: str,
) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context(), pytest.raises(error, match=message):
        jobs.enqueue("default", "report", {}, **options)


def test_without_a_store_a_unique_enqueue_names_the_setting(
    app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("report")(lambda payload: None)
    with pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.enqueue("default", "report", {}, unique=True)


@pytest.mark.parametrize(
    ("until", "held_while_running"), [("started", False), ("finished", True)]
)
def test_the_key_is_released_when_the_job_starts_or_finishes(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    until: str,
    held_while_running: bool,
) -> None:
    while_running: list[str] = []

    def report(payload: Payload) -> None:
        if not payload.get("first"):
            return
        enqueue: dict[str, t.Any] = {
            "queue": "default",
            "job_type": "report",
            "payload": {},
            "unique_key": "k",
            "unique_until": until,
            "job_id": "j-2",
        }
        if held_while_running:  # freed only after the settle: one try says it
            while_running.append(jobs.enqueue(**enqueue))
        else:
            while_running.append(enqueue_once_free(jobs, "j-1", **enqueue))

    jobs.handler("report")(report)
    with store_app.app_context():
        jobs.enqueue(
            "default",
            "report",
            {"first": True},
            unique_key="k",
            job_id="j-1",
            unique_until=until,
        )
    finished = run_worker(lambda f: f.count() >= 1)
    with store_app.app_context():
        after = jobs.enqueue("default", "report", {}, unique_key="k", job_id="j-3")

    assert finished.values() == ["success"]
    assert (while_running == ["j-1"]) is held_while_running
    # Once j-1 finished its key is free, unless the job sent while it ran holds it.
    assert (after == "j-2") is not held_while_running
    assert after != "j-1"


def test_a_tasks_enqueue_many_marks_the_duplicates(
    store_app: Flask, jobs: SQSJobs
) -> None:
    report = report_task(jobs)
    with store_app.app_context():
        first = report.options(unique=True).enqueue(day=1)
        queued = report.options(unique=True).enqueue_many([{"day": 1}, {"day": 2}])

    assert [job.duplicate for job in queued] == [True, False]
    assert queued[0].job_id == first.job_id
    assert queued[1].message_id is not None


def test_a_task_in_a_session_returns_the_holder_as_a_duplicate(
    store_app: Flask, jobs: SQSJobs
) -> None:
    report = report_task(jobs)
    store = t.cast(t.Any, jobs.store(store_app))
    with store_app.app_context(), store.session() as session:
        first = report.options(unique=True, session=session).enqueue(day=1)
        again = report.options(unique=True, session=session).enqueue(day=1)
        session.commit()
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.job_id == first.job_id


def test_a_job_that_fails_to_be_sent_frees_its_key(
    store_app: Flask, jobs: SQSJobs
) -> None:
    jobs.handler("report")(lambda payload: None)
    with store_app.app_context():
        with pytest.raises(ValueError, match="MaximumMessageSize"):
            jobs.enqueue("default", "report", {"blob": "x" * 1_100_000}, unique_key="k")
        again = jobs.enqueue("default", "report", {}, unique_key="k", job_id="j-2")
        third = jobs.enqueue("default", "report", {}, unique_key="k")
    assert again != "j-2"  # sent (a MessageId): the failed job held no key
    assert third == "j-2"
