"""flask_sqs_jobs.testing: record_enqueued, record_finished and work_off."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import record_enqueued
from flask_sqs_jobs.testing import record_finished
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.flask_helpers import sent_jobs
from tests.support import message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.fixture
def ran(jobs: SQSJobs) -> list[Payload]:
    """What ``record`` ran; ``fail`` always raises, ``fan_out`` enqueues ``record``s."""
    payloads: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        payloads.append(payload)

    @jobs.handler("fail")
    def fail(payload: Payload) -> None:
        raise RuntimeError("always fails")

    @jobs.handler("fan_out")
    def fan_out(payload: Payload) -> None:
        for n in range(payload["count"]):
            jobs.enqueue("default", "record", {"n": n})

    return payloads


# -- record_enqueued ------------------------------------------------------------------


def test_record_enqueued_lists_each_job_sent_inside_the_block(
    bare_app: Flask,
    jobs: SQSJobs,
    ran: list[Payload],
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "record", {"n": "before"})
        with record_enqueued(bare_app) as enqueued:
            jobs.enqueue("default", "record", {"n": 1})
            jobs.enqueue("critical", "fail", {"n": 2})
        jobs.enqueue("default", "record", {"n": "after"})

    assert [(j.queue, j.job_type, j.payload) for j in enqueued] == [
        ("default", "record", {"n": 1}),
        ("critical", "fail", {"n": 2}),
    ]
    assert len(sent_jobs(sqs, queue_urls["default"])) == 3


def test_record_enqueued_records_jobs_sent_by_a_view_in_eager_mode(
    make_app: MakeApp, app_config: dict[str, t.Any], jobs: SQSJobs, ran: list[Payload]
) -> None:
    app = make_app({**app_config, "SQS_JOBS_EAGER": True})

    @app.post("/signup")
    def signup() -> str:
        return jobs.enqueue("critical", "record", {"email": "ada@example.com"})

    with record_enqueued(app) as enqueued:
        response = app.test_client().post("/signup")

    assert response.status_code == 200
    assert [(j.queue, j.job_type, j.payload) for j in enqueued] == [
        ("critical", "record", {"email": "ada@example.com"})
    ]
    assert ran == [{"email": "ada@example.com"}]


def test_record_enqueued_ignores_jobs_of_other_apps(
    bare_app: Flask, make_app: MakeApp, jobs: SQSJobs
) -> None:
    other = make_app(extension=SQSJobs())

    with record_enqueued(other) as enqueued, bare_app.app_context():
        jobs.enqueue("default", "record")

    assert enqueued == []


# -- record_finished ------------------------------------------------------------------


def test_record_finished_lists_each_job_with_its_outcome_and_exception(
    bare_app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "record", {"n": 1})
        jobs.enqueue("default", "fail", {"n": 2})

    with record_finished(bare_app) as finished:
        work_off(bare_app)

    by_type = {f.job.job_type: f for f in finished}
    assert set(by_type) == {"record", "fail"}
    assert (by_type["record"].outcome, by_type["record"].exception) == ("success", None)
    assert by_type["fail"].outcome == "retry"
    assert isinstance(by_type["fail"].exception, RuntimeError)
    assert by_type["fail"].job.payload == {"n": 2}


# -- work_off -------------------------------------------------------------------------


def test_work_off_runs_every_job_on_every_queue_and_returns_how_each_ended(
    bare_app: Flask,
    jobs: SQSJobs,
    ran: list[Payload],
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with bare_app.app_context():
        for n in range(3):
            jobs.enqueue("default", "record", {"n": n})
        jobs.enqueue("critical", "record", {"n": 3})
        jobs.enqueue("critical", "fail")

    finished = work_off(bare_app)

    assert sorted(f.outcome for f in finished) == ["retry"] + ["success"] * 4
    assert sorted(p["n"] for p in ran) == [0, 1, 2, 3]
    assert message_count(sqs, queue_urls["default"]) == 0
    # The failed job waits out its visibility timeout for a retry.
    assert message_count(sqs, queue_urls["critical"]) == 1
    assert sent_jobs(sqs, queue_urls["critical"]) == []


def test_work_off_keeps_going_while_jobs_enqueue_more_jobs(
    bare_app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    with bare_app.app_context():
        jobs.enqueue("critical", "fan_out", {"count": 3})

    finished = work_off(bare_app)

    assert [f.job.job_type for f in finished] == ["fan_out"] + ["record"] * 3
    assert sorted(p["n"] for p in ran) == [0, 1, 2]


def test_work_off_can_be_limited_to_some_queues(
    bare_app: Flask,
    jobs: SQSJobs,
    ran: list[Payload],
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "record", {"n": 1})
        jobs.enqueue("critical", "record", {"n": 2})

    finished = work_off(bare_app, queues=["critical"])

    assert [f.job.queue for f in finished] == ["critical"]
    assert ran == [{"n": 2}]
    assert [job.payload for job in sent_jobs(sqs, queue_urls["default"])] == [{"n": 1}]


def test_work_off_with_nothing_to_do_returns_an_empty_list(
    bare_app: Flask, ran: list[Payload]
) -> None:
    assert work_off(bare_app) == []


def test_jobs_enqueued_by_a_view_are_worked_off(
    app: Flask, client: FlaskClient, jobs: SQSJobs, ran: list[Payload]
) -> None:
    @app.post("/signup")
    def signup() -> str:
        return jobs.enqueue("critical", "record", {"email": "ada@example.com"})

    client.post("/signup", headers={"X-Request-ID": "req-1"})
    finished = work_off(app)

    assert [(f.outcome, f.job.correlation_fields) for f in finished] == [
        ("success", {"request_id": "req-1"})
    ]
    assert ran == [{"email": "ada@example.com"}]


class TestAJobThatFailsOverAndOver:
    """With a visibility timeout of 0 a failed job is back at once."""

    @pytest.fixture
    def app_config(self, app_config: dict[str, t.Any]) -> dict[str, t.Any]:
        return {
            **app_config,
            "SQS_JOBS_QUEUES": {
                "default": {"name": "app-default", "visibility_timeout": 0}
            },
        }

    def test_work_off_stops_after_max_jobs(
        self,
        bare_app: Flask,
        jobs: SQSJobs,
        ran: list[Payload],
        sqs: SQSClient,
        queue_urls: dict[str, str],
    ) -> None:
        with bare_app.app_context():
            jobs.enqueue("default", "fail")

        finished = work_off(bare_app, max_jobs=4)

        assert [(f.outcome, f.job.receive_count) for f in finished] == [
            ("retry", 1),
            ("retry", 2),
            ("retry", 3),
            ("retry", 4),
        ]
        assert len(sent_jobs(sqs, queue_urls["default"])) == 1
