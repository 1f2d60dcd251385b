"""Running failed jobs again from the dashboard: one job, or what a search finds."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent

from tests.support import visible_messages

from .conftest import csrf_token
from .conftest import JSON

if t.TYPE_CHECKING:
    import pathlib

    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
HOSTILE = "<img src=x onerror=alert(1)>"


def failed(
    store: SQLAlchemyStore,
    job_id: str,
    status: str = "failed",
    *,
    payload: str | None = '{"n": 1}',
    tags: tuple[str, ...] = (),
    job_type: str = "charge",
) -> None:
    store.job_records().write(
        [
            JobEvent(job_id, job_type, "default", "running", 1, NOW, tags=tags),
            JobEvent(
                job_id,
                job_type,
                "default",
                status,
                1,
                NOW,
                finished_at=NOW if status != "retrying" else None,
                error="ValueError: no",
                payload=payload,
                tags=tags,
            ),
        ]
    )


@pytest.fixture
def store(tmp_path: pathlib.Path) -> cabc.Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    failed(store, "j-1", tags=("batch:1", HOSTILE))
    failed(store, "j-2", "dead_lettered", tags=("batch:1",))
    failed(store, "j-3", payload=None, tags=("batch:1",))
    failed(store, "j-4", "succeeded", tags=("batch:1",))
    failed(store, "j-5", tags=("batch:2",), job_type="refund")
    yield store
    store.close()


@pytest.fixture
def client(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: SQLAlchemyStore
) -> FlaskClient:
    app = make_dashboard_app(
        jobs=SQSJobs(boto_client=sqs, store=store),
        config={"SQS_JOBS_CHECK_JOB_TYPES": False},
    )
    return app.test_client()


def sent(sqs: SQSClient, queues: Queues) -> list[tuple[str, str, t.Any]]:
    bodies = [json.loads(m["Body"]) for m in visible_messages(sqs, queues.source)]
    return sorted((b["job_id"], b["job_type"], b.get("tags")) for b in bodies)


def post(client: FlaskClient, path: str, **form: str) -> t.Any:
    token = csrf_token(client, "/jobs/jobs/j-1")
    return client.post(path, data={"csrf_token": token, **form})


def test_one_job_is_counted_then_sent_again_with_its_id(
    client: FlaskClient, sqs: SQSClient, queues: Queues, store: SQLAlchemyStore
) -> None:
    asked = post(client, "/jobs/jobs/j-1/retry")
    page = asked.get_data(as_text=True)
    assert 'Confirm: run <span id="matching">1</span> failed job(s) again' in page
    assert sent(sqs, queues) == []

    done = post(client, "/jobs/jobs/j-1/retry", confirmed="yes", expected="1")
    assert 'Sent again: <span id="sent">1</span> job(s)' in done.get_data(as_text=True)
    assert sent(sqs, queues) == [("j-1", "charge", sorted(["batch:1", HOSTILE]))]
    body = json.loads(visible_messages(sqs, queues.source)[0]["Body"])
    assert body["payload"] == {"n": 1}
    record = store.job_records().get("j-1")
    assert record is not None
    assert (record.status, record.attempts) == ("queued", 0)


def test_a_search_runs_every_failed_job_it_finds_that_kept_its_payload(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    asked = post(client, "/jobs/retry", tag="batch:1")
    page = asked.get_data(as_text=True)
    assert 'Confirm: run <span id="matching">2</span> failed job(s) again' in page
    assert "1 more match but\nkept no payload" in page

    done = post(client, "/jobs/retry", tag="batch:1", confirmed="yes", expected="2")
    assert 'Sent again: <span id="sent">2</span>' in done.get_data(as_text=True)
    assert [job_id for job_id, _, _ in sent(sqs, queues)] == ["j-1", "j-2"]


def test_a_retry_answers_json_with_what_it_sent(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    token = csrf_token(client, "/jobs/jobs/j-1")
    data = client.post(
        "/jobs/retry",
        data={"csrf_token": token, "job_type": "refund", "confirmed": "yes"},
        headers=JSON,
    ).get_json()
    assert (data["sent"], data["matching"], data["confirmed"]) == (["j-5"], 1, True)


def test_a_status_other_than_a_failure_is_refused(client: FlaskClient) -> None:
    response = post(client, "/jobs/retry", status="succeeded")
    assert response.status_code == 400
    assert "only failed or dead-lettered jobs" in response.get_data(as_text=True)


def test_a_retry_without_the_csrf_token_sends_nothing(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    response = client.post("/jobs/jobs/j-1/retry", data={"confirmed": "yes"})
    assert response.status_code == 400
    assert sent(sqs, queues) == []


def test_a_retry_is_refused_without_authorize(
    make_dashboard_app: MakeDashboardApp,
    sqs: SQSClient,
    queues: Queues,
    store: SQLAlchemyStore,
) -> None:
    jobs = SQSJobs(boto_client=sqs, store=store)
    client = make_dashboard_app(lambda: False, jobs=jobs).test_client()
    for path in ("/jobs/jobs/j-1/retry", "/jobs/retry"):
        assert client.post(path, data={"confirmed": "yes"}).status_code == 403
    assert sent(sqs, queues) == []


def test_hostile_tags_are_escaped_on_the_confirmation_and_the_job_page(
    client: FlaskClient,
) -> None:
    asked = post(client, "/jobs/retry", tag=HOSTILE).get_data(as_text=True)
    job_page = client.get("/jobs/jobs/j-1").get_data(as_text=True)
    for page in (asked, job_page):
        assert HOSTILE not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'id="retry-job"' in job_page
