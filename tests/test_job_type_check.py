"""Enqueueing a job type the app has no handler for is refused, unless turned off."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.flask_helpers import only_sent_job
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def jobs() -> SQSJobs:
    jobs = SQSJobs()
    for job_type in ("send_welcome_email", "send_invoice", "resize_image"):
        jobs.handler(job_type)(lambda payload: None)
    return jobs


def test_a_typo_names_the_close_matches_and_sends_nothing(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    with bare_app.app_context(), pytest.raises(ValueError, match="no handler") as info:
        jobs.enqueue("default", "send_welcom_email", {"user_id": 1})

    message = str(info.value)
    assert "no handler is registered for job type 'send_welcom_email'" in message
    assert "Did you mean 'send_welcome_email'?" in message
    assert "SQS_JOBS_CHECK_JOB_TYPES = False" in message
    assert message_count(sqs, queue_urls["default"]) == 0


def test_without_a_close_match_the_registered_types_are_listed(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with bare_app.app_context(), pytest.raises(ValueError, match="no handler") as info:
        jobs.enqueue("default", "zzz")

    assert "Did you mean" not in str(info.value)
    assert (
        "Registered job types: 'resize_image', 'send_invoice', 'send_welcome_email'."
        in str(info.value)
    )


def test_many_registered_types_are_listed_up_to_a_limit(bare_app: Flask) -> None:
    jobs: SQSJobs = bare_app.extensions["sqs_jobs"]
    for n in range(30):
        jobs.handler(f"type_{n:02}")(lambda payload: None)

    with bare_app.app_context(), pytest.raises(ValueError, match=r"\(33 in all\)"):
        jobs.enqueue("default", "zzz")


def test_control_characters_in_the_job_type_are_escaped(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with bare_app.app_context(), pytest.raises(ValueError, match="no handler") as info:
        jobs.enqueue("default", "evil\n\x1b[31m" + "x" * 5000)

    message = str(info.value)
    assert "\n" not in message
    assert "\x1b" not in message
    assert len(message) < 1000


def test_enqueue_many_names_the_job_and_sends_none(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    batch: list[t.Any] = [("send_invoice", {}), {"job_type": "resize_imag"}]
    with bare_app.app_context(), pytest.raises(ValueError, match="no handler") as info:
        jobs.enqueue_many("default", batch)

    assert str(info.value).startswith("jobs[1]: no handler")
    assert "Did you mean 'resize_image'?" in str(info.value)
    assert message_count(sqs, queue_urls["default"]) == 0


def test_the_cli_refuses_it_with_exit_code_2(
    bare_app: Flask, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    result = bare_app.test_cli_runner().invoke(
        args=["sqs-jobs", "enqueue", "default", "send_invoise"]
    )

    assert result.exit_code == 2
    assert "Did you mean 'send_invoice'?" in result.output
    assert message_count(sqs, queue_urls["default"]) == 0


def test_an_app_that_registers_no_handler_enqueues_any_job_type(
    make_app: MakeApp, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    producer = SQSJobs()
    app = make_app(extension=producer)

    with app.app_context():
        producer.enqueue("default", "handled_elsewhere", {"n": 1})

    assert only_sent_job(sqs, queue_urls["default"]).job_type == "handled_elsewhere"


def test_the_setting_turns_the_check_off(
    make_app: MakeApp,
    app_config: dict[str, t.Any],
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    app = make_app({**app_config, "SQS_JOBS_CHECK_JOB_TYPES": False})

    with app.app_context():
        jobs.enqueue("default", "billing.charge", {"n": 1})
        jobs.enqueue_many("default", [("billing.refund", {})])

    assert message_count(sqs, queue_urls["default"]) == 2


def test_the_setting_must_be_a_bool(
    make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    with pytest.raises(TypeError, match="SQS_JOBS_CHECK_JOB_TYPES must be True or"):
        make_app({**app_config, "SQS_JOBS_CHECK_JOB_TYPES": "false"})
