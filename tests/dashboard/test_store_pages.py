"""The pages a store adds: recent and failed jobs, one job, workers, charts."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import JobStore
from flask_sqs_jobs.store import SQLAlchemyStore

from .conftest import JSON
from .store_records import record_job
from .store_records import register_worker

if t.TYPE_CHECKING:
    import pathlib

    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _fill(store: SQLAlchemyStore) -> SQLAlchemyStore:
    store.create_tables()
    now = _now()
    record_job(
        store,
        "j-ok",
        "send_email",
        "succeeded",
        now - dt.timedelta(minutes=2),
        result={"sent": True, "token": "private-result"},
        progress=1.0,
        progress_message="done",
    )
    record_job(
        store,
        "j-bad",
        "<script>x</script>",
        "dead_lettered",
        now - dt.timedelta(minutes=1),
        attempts=5,
        error="ValueError: <b>nope</b>",
    )
    register_worker(store, "web-1", 4242, now, busy_slots=1)
    return store


@pytest.fixture
def store(tmp_path: pathlib.Path) -> cabc.Iterator[SQLAlchemyStore]:
    """A SQLite store holding two finished jobs and a live worker."""
    store = _fill(SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}"))
    yield store
    store.close()


@pytest.fixture
def store_client(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: JobStore
) -> FlaskClient:
    jobs = SQSJobs(boto_client=sqs, store=store)
    return make_dashboard_app(jobs=jobs).test_client()


def test_recent_jobs_list_every_record(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/jobs", headers=JSON).get_json()
    page = store_client.get("/jobs/jobs").get_data(as_text=True)

    assert [j["job_id"] for j in data["jobs"]] == ["j-bad", "j-ok"]
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
        "progress_message",
        "updated_at",
        "tags",
        "payload",
    }
    assert 'href="/jobs/jobs/j-ok"' in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<b>nope" not in page


@pytest.fixture
def any_store(store_url: str) -> cabc.Iterator[SQLAlchemyStore]:
    """The same records in SQLite, then in PostgreSQL."""
    store = _fill(SQLAlchemyStore(store_url))
    yield store
    store.close()


def test_failed_jobs_list_failed_and_dead_lettered_ones(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, any_store: SQLAlchemyStore
) -> None:
    record_job(any_store, "j-retry", "send_email", "retrying", _now())
    record_job(any_store, "j-failed", "send_email", "failed", _now(), error="Bad: no")
    jobs = SQSJobs(boto_client=sqs, store=any_store)
    client = make_dashboard_app(jobs=jobs).test_client()

    data = client.get("/jobs/jobs?status=failed", headers=JSON).get_json()
    page = client.get("/jobs/jobs?status=failed").get_data(as_text=True)

    assert [j["job_id"] for j in data["jobs"]] == ["j-failed", "j-bad"]
    assert data["status"] == "failed"
    assert "Failed jobs" in page
    assert "j-retry" not in page


def test_one_job_shows_its_record(store_client: FlaskClient) -> None:
    data = store_client.get("/jobs/jobs/j-ok", headers=JSON).get_json()
    page = store_client.get("/jobs/jobs/j-ok").get_data(as_text=True)

    assert data["job"]["status"] == "succeeded"
    assert data["job"]["result"] == {"sent": True, "token": "private-result"}
    assert data["job"]["finished_at"].endswith("Z")
    assert (data["job"]["progress"], data["job"]["progress_message"]) == (1.0, "done")
    assert data["job"]["attempts"] == 1
    assert "private-result" in page
    assert "succeeded" in page


def test_an_unknown_job_is_404(store_client: FlaskClient) -> None:
    assert store_client.get("/jobs/jobs/nope").status_code == 404


def test_results_are_hidden_with_payloads(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, store: JobStore
) -> None:
    jobs = SQSJobs(boto_client=sqs, store=store)
    config = {"SQS_JOBS_DASHBOARD_SHOW_PAYLOADS": False}
    client = make_dashboard_app(jobs=jobs, config=config).test_client()

    assert "private-result" not in client.get("/jobs/jobs/j-ok").get_data(as_text=True)
    listed = client.get("/jobs/jobs", headers=JSON).get_json()["jobs"]
    assert [j["result"] for j in listed] == [None, None]


def test_workers_page_shows_live_and_lost_workers(
    store_client: FlaskClient, store: JobStore
) -> None:
    # Silent for just over STALE_AFTER_SECONDS (60 s), like flask sqs-jobs workers.
    register_worker(store, "web-2", 977, _now() - dt.timedelta(seconds=61))
    data = store_client.get("/jobs/workers", headers=JSON).get_json()
    page = store_client.get("/jobs/workers").get_data(as_text=True)

    states = {w["host"]: (w["state"], w["busy_slots"]) for w in data["workers"]}
    assert states == {"web-1": ("live", 1), "web-2": ("lost", 0)}
    assert data["workers"][0]["worker_id"] == "web-2:977:0a1b2c3d"
    assert "web-1:4242:0a1b2c3d" in page
    assert "1 / 4" in page
    assert '<span class="status status-lost">lost</span>' in page


def test_queues_page_charts_the_last_hour(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, any_store: SQLAlchemyStore
) -> None:
    now = _now()
    record_job(
        any_store, "j-old", "send_email", "succeeded", now - dt.timedelta(hours=2)
    )
    record_job(any_store, "j-other", "send_email", "failed", now, queue="other")
    record_job(any_store, "j-dup", "send_email", "duplicate", now)
    record_job(any_store, "j-running", "send_email", "running", now)
    client = make_dashboard_app(
        jobs=SQSJobs(boto_client=sqs, store=any_store)
    ).test_client()

    data = client.get("/jobs/", headers=JSON).get_json()
    page = client.get("/jobs/").get_data(as_text=True)

    throughput = data["throughput"]
    succeeded, failed = throughput["succeeded"], throughput["failed"]
    assert len(succeeded["default"]) == throughput["minutes"] == 60
    start = dt.datetime.fromisoformat(throughput["start"])

    def minute(job_id: str) -> int:
        record = any_store.job_records().get(job_id)
        assert record is not None
        assert record.finished_at is not None
        return int((record.finished_at - start).total_seconds() // 60)

    assert succeeded["default"][minute("j-ok")] >= 1
    assert failed["default"][minute("j-bad")] == 1
    assert failed["other"][minute("j-other")] == 1
    # The duplicate counts as done; the running job does not.
    assert succeeded["default"][minute("j-dup")] >= 1
    assert (sum(succeeded["default"]), sum(failed["default"])) == (2, 1)
    assert (sum(succeeded["other"]), sum(failed["other"])) == (0, 1)
    assert "3 finished, 1 failed" in page
    assert '<rect class="failed"' in page
    # A chart a person can read: its axes say what they count, a legend
    # names the colours, and each minute says its values on hover.
    assert "minutes ago (UTC); jobs per minute" in page
    assert ">-60 min</text>" in page
    assert ">now</text>" in page
    assert 'class="swatch failed"></span>failed' in page
    index = minute("j-bad")
    at = start + dt.timedelta(minutes=index)
    ok, bad = succeeded["default"][index], failed["default"][index]
    assert f"<title>{at:%H:%M} UTC: {ok} succeeded, {bad} failed</title>" in page


def test_the_live_refresh_reads_counts_without_charts(
    store_client: FlaskClient,
) -> None:
    data = store_client.get("/jobs/?charts=no", headers=JSON).get_json()

    assert [q["queue"] for q in data["queues"]] == ["default", "other"]
    assert data["queues"][0]["visible"] == 0
    assert (data["throughput"], data["throughput_note"]) == (None, None)


class BareStore(JobStore):
    """A store of another kind, which keeps neither job records nor workers."""

    kind = "bare"

    def create_tables(self) -> list[str]:
        return []


def test_a_store_without_records_says_not_available(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    jobs = SQSJobs(boto_client=sqs, store=BareStore())
    client = make_dashboard_app(jobs=jobs).test_client()

    jobs_note = client.get("/jobs/jobs", headers=JSON).get_json()["note"]
    workers_note = client.get("/jobs/workers", headers=JSON).get_json()["note"]

    assert jobs_note == "not available: this job store keeps no job records"
    assert workers_note == "not available: this job store keeps no worker registry"


def test_schedules_show_the_last_fire_the_store_knows(
    make_dashboard_app: MakeDashboardApp,
    sqs: SQSClient,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("cronsim")
    from flask_sqs_jobs import periodic

    fired = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)

    class Claims:
        def last_fired(self, schedule: t.Any) -> dt.datetime | None:
            return fired if schedule.name == "nightly" else None

    monkeypatch.setattr(
        periodic, "claims_for", lambda app, schedules, queues, store: Claims()
    )
    jobs = SQSJobs(boto_client=sqs, store=store)
    jobs.schedule("nightly", cron="0 3 * * *", job_type="report")
    jobs.schedule("hourly", cron="0 * * * *", job_type="report")
    client = make_dashboard_app(jobs=jobs).test_client()

    data = client.get("/jobs/schedules", headers=JSON).get_json()
    page = client.get("/jobs/schedules").get_data(as_text=True)

    last = {s["name"]: s["last_fired"] for s in data["schedules"]}
    assert last == {"nightly": "2026-12-01T02:00:00Z", "hourly": None}
    assert "2026-12-01 02:00" in page
    assert "unknown" in page


def test_jobs_run_by_the_app_show_on_every_page(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, tmp_path: pathlib.Path
) -> None:
    from flask_sqs_jobs import NonRetryableError

    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'eager.db'}")
    store.create_tables()
    jobs = SQSJobs(boto_client=sqs, store=store)

    @jobs.handler("resize")
    def resize(payload: dict[str, t.Any]) -> dict[str, int]:
        return {"width": payload["width"] // 2}

    @jobs.handler("refuse")
    def refuse(payload: dict[str, t.Any]) -> None:
        raise NonRetryableError("not an image")

    app = make_dashboard_app(jobs=jobs, config={"SQS_JOBS_EAGER": True})
    with app.app_context():
        jobs.enqueue("default", "resize", {"width": 640}, job_id="resize-1")
        with pytest.raises(NonRetryableError):
            jobs.enqueue("default", "refuse", {}, job_id="refuse-1")
    client = app.test_client()

    listed = client.get("/jobs/jobs", headers=JSON).get_json()["jobs"]
    failed = client.get("/jobs/jobs?status=failed", headers=JSON).get_json()["jobs"]
    one = client.get("/jobs/jobs/resize-1", headers=JSON).get_json()["job"]
    queues = client.get("/jobs/", headers=JSON).get_json()
    charts = queues["throughput"]
    dead_letters = client.get("/jobs/queues/default/dead-letters")

    assert {j["job_id"]: j["status"] for j in listed} == {
        "resize-1": "succeeded",
        "refuse-1": "failed",
    }
    assert [j["job_id"] for j in failed] == ["refuse-1"]
    assert "not an image" in failed[0]["error"]
    assert one["result"] == {"width": 320}
    assert (sum(charts["succeeded"]["default"]), sum(charts["failed"]["default"])) == (
        1,
        1,
    )
    # Eager jobs never reach SQS: each queue says so instead of its counts.
    assert queues["queues"][0]["error"].startswith("eager mode (SQS_JOBS_EAGER)")
    assert dead_letters.status_code == 404
    assert "No dead letters: eager mode" in dead_letters.get_data(as_text=True)
    store.close()
