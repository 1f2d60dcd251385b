"""``flask sqs-jobs schedules [--json]``: each schedule, where it runs, when next."""

from __future__ import annotations

import json

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs


def app_with_schedules(**config: object) -> Flask:
    jobs = SQSJobs()
    jobs.schedule(
        "new_year", cron="0 3 1 1 *", timezone="Europe/Berlin", job_type="greet"
    )
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}}, **config)
    jobs.init_app(app)
    return app


@pytest.mark.parametrize("runs", ["embedded", "eventbridge"])
def test_the_json_listing_shows_where_each_schedule_runs_and_its_next_times(
    runs: str,
) -> None:
    app = app_with_schedules(SQS_JOBS_SCHEDULER=runs)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "schedules", "--json"])
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)["schedules"]
    schedule = app.extensions["sqs_jobs"].schedules["new_year"]
    expected = [t.isoformat().replace("+00:00", "Z") for t in schedule.next_times(3)]
    assert entry == {
        "name": "new_year",
        "job_type": "greet",
        "queue": "default",
        "cron": "0 3 1 1 *",
        "timezone": "Europe/Berlin",
        "runs": runs,
        "catch_up": False,
        "next": expected,
    }
    assert [moment[5:16] for moment in expected] == ["01-01T02:00"] * 3


def test_the_table_has_a_row_per_schedule() -> None:
    app = app_with_schedules()
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "schedules"])
    assert result.exit_code == 0, result.output
    header, row = result.output.strip().splitlines()
    assert header.split() == ["SCHEDULE", "CRON", "TIMEZONE", "RUNS", "NEXT", "(UTC)"]
    assert row.startswith("new_year")
    assert "0 3 1 1 *" in row
    assert "Europe/Berlin" in row
    assert "embedded" in row
    assert row.count("-01-01 02:00") == 3


def test_an_app_without_schedules_says_how_to_declare_one() -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    SQSJobs(app)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "schedules"])
    assert result.output.strip() == (
        "no periodic jobs: declare them with @jobs.periodic(...)"
    )
