"""The jobs page's search: by job id, tag, job type, status and time range."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore

from .conftest import JSON
from .store_records import record_job

if t.TYPE_CHECKING:
    import pathlib

    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
HOSTILE_TAG = '<script>alert("tag")</script>'


def ago(minutes: int) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes)


@pytest.fixture
def store(tmp_path: pathlib.Path) -> cabc.Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    record_job(store, "j-1", "charge", "succeeded", ago(30), tags=("customer:1",))
    record_job(
        store, "j-2", "charge", "failed", ago(20), tags=("customer:2", HOSTILE_TAG)
    )
    record_job(store, "j-3", "refund", "dead_lettered", ago(10), tags=("customer:1",))
    record_job(store, "j-4", "refund", "succeeded", ago(5))
    yield store
    store.close()


@pytest.fixture
def client(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: SQLAlchemyStore
) -> FlaskClient:
    return make_dashboard_app(jobs=SQSJobs(boto_client=sqs, store=store)).test_client()


def found(client: FlaskClient, query: str) -> list[str]:
    response = client.get(f"/jobs/jobs?{query}", headers=JSON)
    assert response.status_code == 200, response.get_json()
    return [job["job_id"] for job in response.get_json()["jobs"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["j-4", "j-3", "j-2", "j-1"]),
        ("tag=customer%3A1", ["j-3", "j-1"]),
        ("job_type=refund", ["j-4", "j-3"]),
        ("status=failed", ["j-3", "j-2"]),
        ("status=dead_lettered", ["j-3"]),
        ("tag=customer%3A1&status=succeeded", ["j-1"]),
        ("job_id=j-2", ["j-2"]),
        ("job_id=j-2&job_type=refund", []),
        ("job_id=nope", []),
        ("tag=nobody", []),
        ("limit=2", ["j-4", "j-3"]),
    ],
)
def test_each_filter_finds_its_jobs_newest_first(
    client: FlaskClient, query: str, expected: list[str]
) -> None:
    assert found(client, query) == expected


def test_a_time_range_as_the_form_sends_it_is_utc(client: FlaskClient) -> None:
    since = (NOW - dt.timedelta(minutes=25)).strftime("%Y-%m-%dT%H:%M:%S")
    until = (NOW - dt.timedelta(minutes=7)).strftime("%Y-%m-%dT%H:%M")
    assert found(client, f"since={since}&until={until}") == ["j-3", "j-2"]
    assert found(client, f"since={since}&until={until}&tag=customer%3A2") == ["j-2"]


def test_the_page_shows_the_form_filled_and_tags_as_links(client: FlaskClient) -> None:
    page = client.get("/jobs/jobs?tag=customer%3A1&status=failed").get_data(
        as_text=True
    )
    assert 'value="customer:1"' in page
    assert '<option value="failed" selected>' in page
    assert 'href="/jobs/jobs?tag=customer:1"' in page
    assert 'data-job-id="j-3"' in page
    assert 'data-job-id="j-1"' not in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=lost", "status must be one of"),
        ("since=yesterday", "since must be a date and time"),
        ("tag=" + "x" * 65, "tag must be 1 to 64 characters"),
        ("limit=many", "limit must be a whole number"),
    ],
)
def test_a_wrong_filter_is_a_400_that_names_it(
    client: FlaskClient, query: str, message: str
) -> None:
    response = client.get(f"/jobs/jobs?{query}", headers=JSON)
    page = client.get(f"/jobs/jobs?{query}").get_data(as_text=True)
    assert response.status_code == 400
    assert message in response.get_json()["error"]
    assert message in page


def test_hostile_tags_and_filters_are_escaped(client: FlaskClient) -> None:
    listed = client.get("/jobs/jobs").get_data(as_text=True)
    one = client.get("/jobs/jobs/j-2").get_data(as_text=True)
    searched = client.get(
        "/jobs/jobs", query_string={"tag": HOSTILE_TAG, "job_type": '"><b>x'}
    ).get_data(as_text=True)
    for page in (listed, one, searched):
        assert HOSTILE_TAG not in page
        assert "&lt;script&gt;alert(&#34;tag&#34;)&lt;/script&gt;" in page
    assert '"><b>x' not in searched
    assert "&#34;&gt;&lt;b&gt;x" in searched
    data = client.get("/jobs/jobs?job_id=j-2", headers=JSON).get_json()
    assert sorted(data["jobs"][0]["tags"]) == sorted(["customer:2", HOSTILE_TAG])


def test_search_is_refused_without_authorize(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: SQLAlchemyStore
) -> None:
    jobs = SQSJobs(boto_client=sqs, store=store)
    client = make_dashboard_app(lambda: False, jobs=jobs).test_client()
    response = client.get("/jobs/jobs?tag=customer%3A1", headers=JSON)
    assert response.status_code == 403
    assert "j-1" not in response.get_data(as_text=True)


def test_without_a_store_the_page_says_so(
    client: FlaskClient, make_dashboard_app: MakeDashboardApp
) -> None:
    data = make_dashboard_app().test_client().get("/jobs/jobs?tag=x", headers=JSON)
    assert data.status_code == 200
    assert "SQS_JOBS_STORE_URL" in data.get_json()["note"]
