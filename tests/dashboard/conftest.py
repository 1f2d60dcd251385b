"""Fixtures of the dashboard tests: an app with the dashboard at /jobs, over moto."""

from __future__ import annotations

import collections.abc as cabc
import json
import re
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.support import create_queue
from tests.support import message_count as message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

JSON = {"Accept": "application/json"}


class Queues(t.NamedTuple):
    source: str
    dead_letters: str


@pytest.fixture
def queues(sqs: SQSClient) -> Queues:
    dlq = create_queue(sqs, "dash-default-dlq")
    # A high maxReceiveCount: the tests read the source queue many times.
    source = create_queue(
        sqs, "dash-default", dead_letter_url=dlq, max_receive_count=1000
    )
    return Queues(source, dlq)


class MakeDashboardApp(t.Protocol):
    def __call__(
        self,
        authorize: cabc.Callable[[], object] | None = ...,
        *,
        config: dict[str, t.Any] | None = None,
        jobs: SQSJobs | None = None,
    ) -> Flask: ...


@pytest.fixture
def make_dashboard_app(sqs: SQSClient, queues: Queues) -> MakeDashboardApp:
    def make(
        authorize: cabc.Callable[[], object] | None = lambda: True,
        *,
        config: dict[str, t.Any] | None = None,
        jobs: SQSJobs | None = None,
    ) -> Flask:
        app = Flask(__name__)
        app.config.update(
            {
                "SECRET_KEY": "test-secret",
                "SQS_JOBS_QUEUES": {
                    "default": {"name": "dash-default"},
                    "other": {"name": "dash-default-dlq"},
                },
                **(config or {}),
            }
        )
        extension = jobs or SQSJobs(boto_client=sqs)
        extension.init_app(app)
        blueprint = extension.dashboard(authorize=authorize)
        app.register_blueprint(blueprint, url_prefix="/jobs")
        return app

    return make


@pytest.fixture
def dashboard_app(make_dashboard_app: MakeDashboardApp) -> Flask:
    return make_dashboard_app()


@pytest.fixture
def client(dashboard_app: Flask) -> FlaskClient:
    return dashboard_app.test_client()


def dead_letter(
    sqs: SQSClient,
    url: str,
    job_type: str = "send_email",
    payload: dict[str, t.Any] | None = None,
    *,
    error: str = "boom",
    error_type: str = "ValueError",
    source_queue: str = "default",
    reason_text: str | None = None,
    body: str | None = None,
) -> str:
    """Put a dead letter (with the worker's reason attribute) on ``url``.

    ``reason_text`` and ``body`` replace the attribute's JSON and the body.
    """
    if body is None:
        body = json.dumps(
            {"job_type": job_type, "payload": payload or {"n": 1}, "job_id": "j-1"}
        )
    reason = {
        "error_type": error_type,
        "error": error,
        "failed_at": "2026-12-01T03:00:00Z",
        "source_queue": source_queue,
        "receive_count": 3,
    }
    text = json.dumps(reason) if reason_text is None else reason_text
    response = sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={"dead_letter": {"DataType": "String", "StringValue": text}},
    )
    return response["MessageId"]


def csrf_token(
    client: FlaskClient, path: str = "/jobs/queues/default/dead-letters"
) -> str:
    """The CSRF token of the form on ``path`` for this client's session."""
    page = client.get(path).get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page
    return match.group(1)
