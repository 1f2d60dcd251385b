"""Expiry: ``expires_in=`` / ``expires_at=`` at enqueue; a late job is deleted unrun."""

from __future__ import annotations

import datetime as dt
import json
import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def app_config(app_config: dict[str, t.Any], store_url: str) -> dict[str, t.Any]:
    return {**app_config, "SQS_JOBS_STORE_URL": store_url}


@pytest.fixture
def app(make_app: MakeApp, jobs: SQSJobs) -> t.Iterator[Flask]:
    app = make_app()
    jobs.store(app).create_tables()
    with app.app_context():
        yield app
    jobs.store(app).close()


def _until_past(moment: dt.datetime) -> None:
    """Wait for the wall clock to pass ``moment`` (what expiry is about)."""
    while dt.datetime.now(dt.UTC) <= moment:
        time.sleep(0.01)


def test_a_job_received_after_it_expired_is_deleted_unrun_with_a_record(
    app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
) -> None:
    ran: list[Payload] = []
    jobs.handler("notify")(ran.append)
    expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=200)
    jobs.enqueue("default", "notify", {"n": 1}, job_id="late-1", expires_at=expires_at)
    _until_past(expires_at)

    [finished] = work_off(app)

    assert finished.outcome == "expired"  # the job_finished signal says so
    assert ran == []
    assert message_count(sqs, queue_urls["default"]) == 0
    record = jobs.get_job("late-1")
    assert record is not None
    assert record.status == "expired"
    assert record.finished_at is not None
    assert record.started_at is None
    [line] = [e for e in log_events if e["event"] == "job_finished"]
    assert line["outcome"] == "expired"
    assert line["log_level"] == "warning"
    assert line["expires_at"].startswith(expires_at.strftime("%Y-%m-%dT%H:%M:%S"))


def test_a_job_started_before_it_expired_runs_to_its_end(
    app: Flask, jobs: SQSJobs
) -> None:
    # Received well within its 5 s, even on a loaded machine.
    expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)

    @jobs.handler("slow")
    def slow(payload: Payload) -> str:
        _until_past(expires_at)  # it outlives its expiry while running
        return "done"

    jobs.enqueue("default", "slow", {}, job_id="slow-1", expires_at=expires_at)
    [finished] = work_off(app)

    assert (finished.outcome, finished.result) == ("success", "done")
    record = jobs.get_job("slow-1")
    assert record is not None
    assert record.status == "succeeded"


def test_expires_in_counts_from_the_enqueue(app: Flask, jobs: SQSJobs) -> None:
    jobs.handler("notify")(lambda payload: None)
    jobs.enqueue("default", "notify", {}, expires_in=3600)
    jobs.enqueue("default", "notify", {}, expires_in=0.001)
    _until_past(dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=1))
    outcomes = sorted(f.outcome for f in work_off(app))
    assert outcomes == ["expired", "success"]


def test_the_body_carries_expires_at_in_utc(
    app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    paris = dt.timezone(dt.timedelta(hours=2))
    at = dt.datetime(2031, 5, 4, 14, 30, tzinfo=paris)
    jobs.enqueue("default", "notify", {}, expires_at=at)
    [message] = sqs.receive_message(QueueUrl=queue_urls["default"])["Messages"]
    assert json.loads(message["Body"])["expires_at"] == "2031-05-04T12:30:00.000Z"


@pytest.mark.parametrize("value", ["soon", 17, "2031-05-04T12:30:00"])
def test_an_unreadable_expires_at_in_a_body_is_ignored_with_a_warning(
    value: object,
    app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
    log_events: list[EventDict],
) -> None:
    ran: list[Payload] = []
    jobs.handler("notify")(ran.append)
    body = {"job_type": "notify", "payload": {"x": 1}, "expires_at": value}
    sqs.send_message(QueueUrl=queue_urls["default"], MessageBody=json.dumps(body))

    [finished] = work_off(app)

    assert finished.outcome == "success"
    assert ran == [{"x": 1}]
    [warning] = [e for e in log_events if e["event"] == "expires_at_invalid"]
    assert warning["log_level"] == "warning"
    assert warning["sent_expires_at"] == repr(value)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"expires_in": 5, "expires_at": dt.datetime.now(dt.UTC)},
            ValueError,
            "either expires_in or expires_at",
        ),
        ({"expires_in": 0}, ValueError, "expires_in must be a positive"),
        ({"expires_in": float("inf")}, ValueError, "finite"),
        ({"expires_in": "60"}, TypeError, "expires_in must be a number"),
        ({"expires_in": True}, TypeError, "expires_in must be a number"),
        ({"expires_at": "tomorrow"}, TypeError, "expires_at must be a datetime"),
        (
            {"expires_at": dt.datetime(2031, 1, 1)},
            ValueError,
            "expires_at must be timezone-aware",
        ),
    ],
)
def test_bad_expiry_options_are_refused_before_anything_is_sent(
    options: dict[str, t.Any],
    error: type[Exception],
    message: str,
    app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with pytest.raises(error, match=message):
        jobs.enqueue("default", "notify", {}, **options)
    assert message_count(sqs, queue_urls["default"]) == 0
