"""Random and hostile arguments to ``flask sqs-jobs enqueue``: exit 0 or 2, never 1."""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ
from tests.fuzz.strategies import hostile_text
from tests.fuzz.strategies import json_text
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


#: Arguments as a shell passes them: valid UTF-8, no NUL byte.
cli_text = hostile_text.filter(_encodable)


@pytest.fixture
def app(sqs: SQSClient) -> Flask:
    url = create_queue(sqs, "fuzz")
    app = Flask(__name__)
    app.config.update(TESTING=True, SQS_JOBS_QUEUES={"default": {"url": url}})
    SQSJobs(app, boto_client=sqs)
    return app


@FUZZ
@given(
    queue=st.just("default") | cli_text,
    job_type=st.just("ping") | cli_text,
    payload=json_text.filter(_encodable),
)
def test_enqueue_exits_0_or_2_with_one_error_line(
    app: Flask, queue: str, job_type: str, payload: str
) -> None:
    result = app.test_cli_runner().invoke(
        args=["sqs-jobs", "enqueue", queue, job_type, payload]
    )

    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert "Error" in result.output
