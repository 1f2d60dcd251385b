"""Payloads stay out of Sentry events by default; send_payloads=True sends them."""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

import pytest
import sentry_sdk
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.contrib.sentry import SentryMiddleware
from flask_sqs_jobs.engine.model._outcome import Outcome
from flask_sqs_jobs.testing import FinishedJob
from flask_sqs_jobs.testing import work_off
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

SECRET = "s3cr3t-Ünïcode-'quoted'-token"
CARD_NUMBER = 4111111111111111


class RecordingTransport(Transport):
    def __init__(self) -> None:
        super().__init__()
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def dumps(self) -> str:
        """Everything sent, as JSON with non-ASCII characters left as they are."""
        items = [
            item.payload.json for envelope in self.envelopes for item in envelope.items
        ]
        return json.dumps(items, ensure_ascii=False, default=str)

    def errors(self) -> list[dict[str, t.Any]]:
        return [
            t.cast("dict[str, t.Any]", item.payload.json)
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == "event"
        ]


@pytest.fixture
def sentry() -> cabc.Iterator[RecordingTransport]:
    """sentry-sdk with its defaults (local variables included), tracing on."""
    transport = RecordingTransport()
    sentry_sdk.init(
        dsn="https://public@sentry.invalid/1",
        transport=transport,
        traces_sample_rate=1.0,
    )
    try:
        yield transport
    finally:
        sentry_sdk.get_client().close()
        sentry_sdk.get_global_scope().set_client(None)


def run_failing_job(sqs: SQSClient, middleware: SentryMiddleware) -> FinishedJob:
    url = create_queue(sqs, "payloads", visibility_timeout=30)
    app = Flask(__name__)
    app.config.update(
        TESTING=True,
        SQS_JOBS_QUEUES={"default": {"url": url}},
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
    )
    jobs = SQSJobs(app, boto_client=sqs, middleware=[middleware])

    @jobs.handler("charge")
    def charge(payload: dict[str, t.Any]) -> None:
        # Not named "token": sentry-sdk's own scrubber filters that name.
        reference = payload["reference"]
        card = payload["card"]["number"]
        sentry_sdk.add_breadcrumb(message=f"charging with {reference}")
        raise ConnectionError(f"card {card} declined; mail server down")

    with app.app_context():
        jobs.enqueue(
            "default",
            "charge",
            {"reference": SECRET, "card": {"number": CARD_NUMBER}, "user_id": 42},
        )
    [finished] = work_off(app)
    assert finished.outcome is Outcome.RETRY
    return finished


def test_a_failing_job_reports_no_payload_value_by_default(
    sentry: RecordingTransport, sqs: SQSClient
) -> None:
    run_failing_job(sqs, SentryMiddleware())

    [error] = sentry.errors()
    assert error["exception"]["values"][-1]["type"] == "ConnectionError"
    sent = sentry.dumps()
    assert SECRET not in sent
    assert "s3cr3t" not in sent
    assert str(CARD_NUMBER) not in sent
    frames = error["exception"]["values"][-1]["stacktrace"]["frames"]
    handler = next(f for f in frames if f["function"] == "charge")
    assert handler["vars"]["reference"] == "[Filtered]"
    assert handler["vars"]["payload"] == {
        "reference": "[Filtered]",
        "card": {"number": "[Filtered]"},
        "user_id": "42",
    }
    library = [f for f in frames if f.get("module", "").startswith("flask_sqs_jobs")]
    assert library
    assert all("vars" not in f for f in library)


def test_an_error_reported_after_the_job_carries_no_payload_either(
    sentry: RecordingTransport, sqs: SQSClient
) -> None:
    finished = run_failing_job(sqs, SentryMiddleware())
    sentry.envelopes.clear()

    # As a logging integration would, when the worker logs the failure.
    assert finished.exception is not None
    sentry_sdk.capture_exception(finished.exception)

    [error] = sentry.errors()
    assert error["exception"]["values"][-1]["type"] == "ConnectionError"
    sent = sentry.dumps()
    assert SECRET not in sent
    assert str(CARD_NUMBER) not in sent


def test_send_payloads_lets_sentry_sdk_send_them(
    sentry: RecordingTransport, sqs: SQSClient
) -> None:
    run_failing_job(sqs, SentryMiddleware(send_payloads=True))

    [error] = sentry.errors()
    frames = error["exception"]["values"][-1]["stacktrace"]["frames"]
    handler = next(f for f in frames if f["function"] == "charge")
    assert SECRET in handler["vars"]["reference"]
    assert str(CARD_NUMBER) in error["exception"]["values"][-1]["value"]
