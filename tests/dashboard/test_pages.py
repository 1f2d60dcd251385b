"""Every page of the dashboard, as HTML and as JSON, over moto's SQS."""

from __future__ import annotations

import re
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from .conftest import dead_letter
from .conftest import JSON

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues


def test_queues_page_shows_the_counts_of_each_queue_and_its_dead_letters(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    sqs.send_message(QueueUrl=queues.source, MessageBody="{}")
    sqs.send_message(QueueUrl=queues.source, MessageBody="{}", DelaySeconds=60)
    dead_letter(sqs, queues.dead_letters)

    response = client.get("/jobs/")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    row = page[page.index('data-queue="default"') :].split("</tr>")[0]
    assert re.findall(r'data-field="(\w+)">(\d+)<', row) == [
        ("visible", "1"),
        ("in_flight", "0"),
        ("delayed", "1"),
        ("dead_letter", "1"),
    ]
    assert 'href="/jobs/queues/default/dead-letters"' in row
    assert "needs a job store (SQS_JOBS_STORE_URL)" in page


def test_queues_page_answers_json_with_stable_keys(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    sqs.send_message(QueueUrl=queues.source, MessageBody="{}")
    dead_letter(sqs, queues.dead_letters)

    data = client.get("/jobs/", headers=JSON).get_json()

    assert set(data) == {
        "queues",
        "store",
        "throughput",
        "throughput_note",
        "generated_at",
    }
    assert data["store"] is False
    assert data["throughput"] is None
    default, other = data["queues"]
    assert default == {
        "queue": "default",
        "visible": 1,
        "in_flight": 0,
        "delayed": 0,
        "dead_letter": {"visible": 1, "in_flight": 0, "delayed": 0},
        "error": None,
    }
    assert other["queue"] == "other"
    assert other["dead_letter"] is None


def test_a_queue_sqs_lacks_shows_an_error_in_its_row_only(
    make_dashboard_app: MakeDashboardApp,
) -> None:
    app = make_dashboard_app(
        config={"SQS_JOBS_QUEUES": {"gone": {"name": "no-such-queue"}}}
    )

    data = app.test_client().get("/jobs/", headers=JSON).get_json()

    assert data["queues"][0]["queue"] == "gone"
    assert "no-such-queue" in data["queues"][0]["error"]


def test_dead_letters_page_shows_reason_and_payload_without_consuming(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    message_id = dead_letter(
        sqs, queues.dead_letters, "charge_card", {"order": 7}, error="card declined"
    )

    page = client.get("/jobs/queues/default/dead-letters").get_data(as_text=True)

    assert "charge_card" in page
    assert "<strong>ValueError</strong>: card declined" in page
    assert "on receive 3" in page
    assert "&#34;order&#34;: 7" in page
    assert f'value="{message_id}"' in page
    data = client.get("/jobs/queues/default/dead-letters", headers=JSON).get_json()
    assert data["counts"] == {"visible": 1, "in_flight": 0, "delayed": 0}


def test_dead_letters_answer_json(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    message_id = dead_letter(sqs, queues.dead_letters, "charge_card", {"order": 7})

    data = client.get("/jobs/queues/default/dead-letters", headers=JSON).get_json()

    assert set(data) == {
        "queue",
        "dead_letter_queue",
        "counts",
        "limit",
        "payloads_shown",
        "dead_letters",
        "csrf_token",
        "filter",
    }
    assert data["filter"] == {"job_type": None, "error_type": None}
    (letter,) = data["dead_letters"]
    assert letter["message_id"] == message_id
    assert letter["job_type"] == "charge_card"
    assert letter["reason"]["error_type"] == "ValueError"
    assert letter["reason"]["receive_count"] == 3
    assert letter["preview"] == '{\n  "order": 7\n}'
    assert letter["truncated"] is False
    assert letter["sent_at"].endswith("Z")


def test_payloads_are_hidden_when_configured(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    app = make_dashboard_app(config={"SQS_JOBS_DASHBOARD_SHOW_PAYLOADS": False})
    dead_letter(sqs, queues.dead_letters, "charge_card", {"card": "4111-secret"})
    client = app.test_client()

    page = client.get("/jobs/queues/default/dead-letters").get_data(as_text=True)
    data = client.get("/jobs/queues/default/dead-letters", headers=JSON).get_json()

    assert "4111-secret" not in page
    assert "Payloads are hidden" in page
    assert data["payloads_shown"] is False
    assert data["dead_letters"][0]["preview"] is None
    assert "4111-secret" not in str(data)


def test_a_queue_without_dead_letter_queue_says_so(client: FlaskClient) -> None:
    page = client.get("/jobs/queues/other/dead-letters").get_data(as_text=True)

    assert "has no dead-letter queue" in page


@pytest.mark.parametrize(
    "path", ["/jobs/queues/nope/dead-letters", "/jobs/queues/..%2Fx/dead-letters"]
)
def test_queue_names_outside_the_configuration_are_404(
    client: FlaskClient, path: str
) -> None:
    assert client.get(path).status_code == 404


def test_an_unknown_queue_answers_json_404(client: FlaskClient) -> None:
    response = client.get("/jobs/queues/nope/dead-letters", headers=JSON)

    assert response.status_code == 404
    assert response.get_json()["message"] == "No such queue in SQS_JOBS_QUEUES."


@pytest.mark.parametrize(
    ("path", "key"),
    [("/jobs/jobs", "jobs"), ("/jobs/jobs?status=failed", "jobs")],
)
def test_job_pages_without_a_store_say_what_a_store_adds(
    client: FlaskClient, path: str, key: str
) -> None:
    page = client.get(path).get_data(as_text=True)
    data = client.get(path, headers=JSON).get_json()

    assert "needs a job store (SQS_JOBS_STORE_URL)" in page
    assert "A job store keeps a record of every job" in page
    assert data[key] == []
    assert data["note"] == "needs a job store (SQS_JOBS_STORE_URL)"


def test_one_job_and_workers_without_a_store(client: FlaskClient) -> None:
    job = client.get("/jobs/jobs/j-1", headers=JSON).get_json()
    workers = client.get("/jobs/workers", headers=JSON).get_json()

    assert job == {"job_id": "j-1", "job": None, "note": job["note"]}
    assert "SQS_JOBS_STORE_URL" in job["note"]
    assert workers["workers"] == []
    assert "SQS_JOBS_STORE_URL" in workers["note"]
    assert "SQS_JOBS_STORE_URL" in client.get("/jobs/workers").get_data(as_text=True)


def test_schedules_page_lists_next_runs(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    pytest.importorskip("cronsim")
    jobs = SQSJobs(boto_client=sqs)

    @jobs.periodic("nightly_report", cron="0 3 * * *", timezone="Europe/Berlin")
    def nightly_report(payload: dict[str, t.Any]) -> None: ...

    client = make_dashboard_app(jobs=jobs).test_client()
    data = client.get("/jobs/schedules", headers=JSON).get_json()
    page = client.get("/jobs/schedules").get_data(as_text=True)

    (schedule,) = data["schedules"]
    assert schedule["name"] == "nightly_report"
    assert schedule["cron"] == "0 3 * * *"
    assert schedule["timezone"] == "Europe/Berlin"
    assert schedule["last_fired"] is None
    assert len(schedule["next"]) == 3
    assert all(t.endswith(":00:00Z") for t in schedule["next"])
    assert "nightly_report" in page
    assert "needs a store" in page


def test_no_schedules(client: FlaskClient) -> None:
    assert client.get("/jobs/schedules", headers=JSON).get_json()["schedules"] == []
    assert "No periodic jobs" in client.get("/jobs/schedules").get_data(as_text=True)


def test_pages_carry_a_strict_content_security_policy(client: FlaskClient) -> None:
    for path in ["/jobs/", "/jobs/queues/default/dead-letters", "/jobs/workers"]:
        response = client.get(path)
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        page = response.get_data(as_text=True)
        assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
        assert " style=" not in page


def test_the_script_and_stylesheet_are_served_from_the_package(
    client: FlaskClient,
) -> None:
    with client.get("/jobs/static/dashboard.js") as script:
        assert script.status_code == 200
        assert "refreshQueues" in script.get_data(as_text=True)
    with client.get("/jobs/static/dashboard.css") as css:
        assert css.status_code == 200


def test_no_secret_key_is_said_on_every_page(
    make_dashboard_app: MakeDashboardApp,
) -> None:
    app = make_dashboard_app(config={"SECRET_KEY": None})

    page = app.test_client().get("/jobs/").get_data(as_text=True)

    assert "The app has no <code>SECRET_KEY</code>" in page


def test_building_without_authorize_needs_allow_anonymous(
    bare_sqs_jobs: SQSJobs,
) -> None:
    with pytest.raises(ValueError, match="needs authorize="):
        bare_sqs_jobs.dashboard()
    with pytest.raises(TypeError, match="authorize must be a function"):
        bare_sqs_jobs.dashboard(authorize=True)  # type: ignore[arg-type]
    assert bare_sqs_jobs.dashboard(allow_anonymous=True).name == "sqs_jobs_dashboard"


@pytest.fixture
def bare_sqs_jobs() -> SQSJobs:
    return SQSJobs()


def test_anonymous_dashboard_serves_pages(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = {"default": {"name": "dash-default"}}
    jobs = SQSJobs(app, boto_client=sqs)
    app.register_blueprint(jobs.dashboard(allow_anonymous=True), url_prefix="/ops")

    assert app.test_client().get("/ops/").status_code == 200
