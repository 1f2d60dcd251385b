"""Request ids: a web request's id travels with the jobs it enqueues."""

from __future__ import annotations

import re
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from tests.flask_helpers import sent_jobs

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

GENERATED_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def app(app: Flask, jobs: SQSJobs) -> Flask:
    """The test app with a view that enqueues ``count`` jobs and one that does not."""

    @app.post("/enqueue/<int:count>")
    def enqueue(count: int) -> dict[str, list[str]]:
        ids = [jobs.enqueue("default", "noop", {"n": n}) for n in range(count)]
        return {"queued": ids}

    @app.get("/ping")
    def ping() -> str:
        return "pong"

    return app


def request_ids(sqs: SQSClient, url: str) -> list[str | None]:
    """The ``request_id`` correlation field of each job on the queue, by payload."""
    jobs = sorted(sent_jobs(sqs, url), key=lambda job: job.payload["n"])
    return [job.correlation_fields.get("request_id") for job in jobs]


def test_the_request_id_header_is_copied_into_the_jobs_correlation_fields(
    client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    response = client.post("/enqueue/1", headers={"X-Request-ID": "req-42"})

    assert response.status_code == 200
    assert request_ids(sqs, queue_urls["default"]) == ["req-42"]
    assert response.headers["X-Request-ID"] == "req-42"


def test_without_the_header_one_id_is_generated_for_the_whole_request(
    client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    response = client.post("/enqueue/3")

    generated = response.headers["X-Request-ID"]
    assert GENERATED_ID.fullmatch(generated)
    assert request_ids(sqs, queue_urls["default"]) == [generated] * 3


def test_each_request_without_the_header_gets_its_own_id(client: FlaskClient) -> None:
    first = client.get("/ping").headers["X-Request-ID"]
    second = client.get("/ping").headers["X-Request-ID"]

    assert GENERATED_ID.fullmatch(first)
    assert GENERATED_ID.fullmatch(second)
    assert first != second


def test_requests_sharing_an_app_context_each_keep_their_own_id(
    app: Flask, client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    """A request reuses an app context that is already pushed (here, the one
    pytest-flask pushes; in user tests, ``with app.app_context():``)."""
    with app.app_context():
        answered = [
            client.post("/enqueue/1", headers=headers).headers["X-Request-ID"]
            for headers in ({"X-Request-ID": "req-1"}, {"X-Request-ID": "req-2"}, {})
        ]

    assert answered[:2] == ["req-1", "req-2"]
    assert GENERATED_ID.fullmatch(answered[2])
    jobs = sent_jobs(sqs, queue_urls["default"])
    assert sorted(job.correlation_fields["request_id"] for job in jobs) == sorted(
        answered
    )


def test_the_response_carries_the_request_id_even_when_nothing_was_enqueued(
    client: FlaskClient,
) -> None:
    response = client.get("/ping", headers={"X-Request-ID": "req-7"})

    assert response.headers["X-Request-ID"] == "req-7"


@pytest.mark.parametrize(
    "incoming",
    [
        "x" * 129,
        "req 42",
        "req-42\tinjected=1",
        "<script>",
        "",
        "ré-42",
    ],
    ids=["too-long", "space", "tab", "markup", "empty", "non-ascii"],
)
def test_an_unacceptable_header_is_replaced_by_a_generated_id(
    client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str], incoming: str
) -> None:
    response = client.post("/enqueue/1", headers={"X-Request-ID": incoming})

    generated = response.headers["X-Request-ID"]
    assert GENERATED_ID.fullmatch(generated)
    assert request_ids(sqs, queue_urls["default"]) == [generated]


@pytest.mark.parametrize(
    "incoming",
    ["x" * 128, "0af7651916cd43dd8448eb211c80319c", "lb:1-2/3@edge+4=5.6_7"],
    ids=["128-chars", "hex", "punctuation"],
)
def test_an_id_of_up_to_128_usual_characters_is_kept(
    client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str], incoming: str
) -> None:
    response = client.post("/enqueue/1", headers={"X-Request-ID": incoming})

    assert response.headers["X-Request-ID"] == incoming
    assert request_ids(sqs, queue_urls["default"]) == [incoming]


def test_a_request_id_the_caller_passes_is_kept(
    app: Flask, client: FlaskClient, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    @app.post("/forward")
    def forward() -> str:
        fields = {"request_id": "upstream-1", "tenant": "t1"}
        return jobs.enqueue("default", "noop", {"n": 0}, correlation_fields=fields)

    client.post("/forward", headers={"X-Request-ID": "req-42"})

    (job,) = sent_jobs(sqs, queue_urls["default"])
    assert job.correlation_fields == {"request_id": "upstream-1", "tenant": "t1"}


def test_other_correlation_fields_are_kept_beside_the_request_id(
    app: Flask, client: FlaskClient, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    @app.post("/tagged")
    def tagged() -> str:
        return jobs.enqueue(
            "default", "noop", {"n": 0}, correlation_fields={"user_id": 7}
        )

    client.post("/tagged", headers={"X-Request-ID": "req-42"})

    (job,) = sent_jobs(sqs, queue_urls["default"])
    assert job.correlation_fields == {"request_id": "req-42", "user_id": 7}


def test_outside_a_request_jobs_carry_no_request_id(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: dict[str, str]
) -> None:
    with bare_app.app_context():
        jobs.enqueue("default", "noop", {"n": 0})

    assert request_ids(sqs, queue_urls["default"]) == [None]


class TestACustomHeader:
    @pytest.fixture
    def app_config(self, app_config: dict[str, t.Any]) -> dict[str, t.Any]:
        return {**app_config, "SQS_JOBS_REQUEST_ID_HEADER": "X-Correlation-ID"}

    def test_the_configured_header_is_read_and_answered(
        self, client: FlaskClient, sqs: SQSClient, queue_urls: dict[str, str]
    ) -> None:
        response = client.post(
            "/enqueue/1",
            headers={"X-Correlation-ID": "corr-1", "X-Request-ID": "ignored"},
        )

        assert request_ids(sqs, queue_urls["default"]) == ["corr-1"]
        assert response.headers["X-Correlation-ID"] == "corr-1"
        assert "X-Request-ID" not in response.headers


def test_a_request_id_header_set_by_the_view_is_left_alone(
    app: Flask, client: FlaskClient
) -> None:
    @app.get("/own-id")
    def own_id() -> tuple[str, dict[str, str]]:
        return "ok", {"X-Request-ID": "chosen-by-the-view"}

    response = client.get("/own-id", headers={"X-Request-ID": "req-42"})

    assert response.headers.getlist("X-Request-ID") == ["chosen-by-the-view"]
