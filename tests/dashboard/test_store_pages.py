"""The pages a store adds: recent and failed jobs, one job, workers, charts."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest

from .conftest import JSON
from .fake_store import BareStore
from .fake_store import FakeStore
from .fake_store import Record
from .fake_store import RecordingJobs
from .fake_store import Worker

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp

NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.records = [
        Record(
            "j-ok",
            "send_email",
            "default",
            "succeeded",
            enqueued_at=NOW - dt.timedelta(minutes=3),
            finished_at=NOW - dt.timedelta(minutes=2),
            result={"sent": True, "token": "private-result"},
            progress={"fraction": 1.0, "message": "done"},
        ),
        Record(
            "j-bad",
            "<script>x</script>",
            "default",
            "dead_lettered",
            attempts=5,
            finished_at=NOW - dt.timedelta(minutes=1),
            error="ValueError: <b>nope</b>",
        ),
    ]
    store.workers = [Worker("w-1", "web-1", 4242, ["default"], 4, 1, NOW, NOW, "0.1.0")]
    return store


@pytest.fixture
def store_client(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: FakeStore
) -> FlaskClient:
    jobs = RecordingJobs(boto_client=sqs, store=store)
    return make_dashboard_app(jobs=jobs).test_client()


def test_recent_jobs_list_every_record(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/jobs", headers=JSON).get_json()
    page = store_client.get("/jobs/jobs").get_data(as_text=True)

    assert [j["job_id"] for j in data["jobs"]] == ["j-ok", "j-bad"]
    assert data["note"] is None
    assert set(data["jobs"][0]) == {
        "job_id",
        "job_type",
        "queue",
        "status",
        "attempts",
        "enqueued_at",
        "started_at",
        "finished_at",
        "result",
        "error",
        "progress",
    }
    assert 'href="/jobs/jobs/j-ok"' in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<b>nope" not in page


def test_failed_jobs_list_only_failed_ones(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/jobs?status=failed", headers=JSON).get_json()

    assert [j["job_id"] for j in data["jobs"]] == ["j-bad"]
    assert data["status"] == "failed"


def test_one_job_shows_its_record(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/jobs/j-ok", headers=JSON).get_json()
    page = store_client.get("/jobs/jobs/j-ok").get_data(as_text=True)

    assert data["job"]["status"] == "succeeded"
    assert data["job"]["result"] == {"sent": True, "token": "private-result"}
    assert data["job"]["finished_at"].endswith("Z")
    assert "private-result" in page
    assert "succeeded" in page


def test_an_unknown_job_is_404(store_client: FlaskClient) -> None:
    assert store_client.get("/jobs/jobs/nope").status_code == 404


def test_results_are_hidden_with_payloads(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: FakeStore
) -> None:
    jobs = RecordingJobs(boto_client=sqs, store=store)
    config = {"SQS_JOBS_DASHBOARD_SHOW_PAYLOADS": False}
    client = make_dashboard_app(jobs=jobs, config=config).test_client()

    assert "private-result" not in client.get("/jobs/jobs/j-ok").get_data(as_text=True)
    assert (
        client.get("/jobs/jobs", headers=JSON).get_json()["jobs"][0]["result"] is None
    )


def test_workers_page_lists_live_workers(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/workers", headers=JSON).get_json()
    page = store_client.get("/jobs/workers").get_data(as_text=True)

    (worker,) = data["workers"]
    assert worker["host"] == "web-1"
    assert worker["busy_slots"] == 1
    assert "web-1" in page
    assert "1 / 4" in page


def test_queues_page_charts_the_last_hour(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/", headers=JSON).get_json()
    page = store_client.get("/jobs/").get_data(as_text=True)

    succeeded = data["throughput"]["succeeded"]["default"]
    failed = data["throughput"]["failed"]["default"]
    assert len(succeeded) == 60
    assert (sum(succeeded), sum(failed)) == (1, 1)
    assert succeeded.index(1) < failed.index(1)
    assert "2 finished, 1 failed" in page
    assert '<rect class="failed"' in page


def test_a_store_without_records_says_not_available(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    jobs = RecordingJobs(boto_client=sqs, store=BareStore())
    client = make_dashboard_app(jobs=jobs).test_client()

    jobs_note = client.get("/jobs/jobs", headers=JSON).get_json()["note"]
    workers_note = client.get("/jobs/workers", headers=JSON).get_json()["note"]

    assert jobs_note == "not available: this job store keeps no job records"
    assert workers_note == "not available: this job store keeps no worker registry"


def test_schedules_show_the_last_fire_the_store_knows(
    make_dashboard_app: MakeDashboardApp,
    sqs: SQSClient,
    store: FakeStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("cronsim")
    from flask_sqs_jobs import _scheduler

    fired = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)

    class Claims:
        def last_fired(self, schedule: t.Any) -> dt.datetime | None:
            return fired if schedule.name == "nightly" else None

    monkeypatch.setattr(_scheduler, "claims_for", lambda app, jobs: Claims())
    jobs = RecordingJobs(boto_client=sqs, store=store)
    jobs.schedule("nightly", cron="0 3 * * *", job_type="report")
    jobs.schedule("hourly", cron="0 * * * *", job_type="report")
    client = make_dashboard_app(jobs=jobs).test_client()

    data = client.get("/jobs/schedules", headers=JSON).get_json()
    page = client.get("/jobs/schedules").get_data(as_text=True)

    last = {s["name"]: s["last_fired"] for s in data["schedules"]}
    assert last == {"nightly": "2026-12-01T02:00:00Z", "hourly": None}
    assert "2026-12-01 02:00" in page
    assert "unknown" in page
