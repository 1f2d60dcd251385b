"""Declaring periodic jobs: what is checked at declaration, and fire() for tests."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs


def eager_app(jobs: SQSJobs) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "q"}, "reports": {"name": "r"}},
        SQS_JOBS_EAGER=True,
    )
    jobs.init_app(app)
    return app


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("0 3 * *", "has 4 fields"),
        ("0 3 * * * *", "has 6 fields"),
        ("61 3 * * *", "Bad minute"),
        ("0 3 L * *", "not standard cron"),
        ("0 3 * * 5#3", "not standard cron"),
        ("@daily", "has 1 fields"),
        ("0 3 ? * MON", "not standard cron"),
    ],
)
def test_a_bad_cron_expression_raises_value_error_naming_the_schedule(
    cron: str, problem: str
) -> None:
    jobs = SQSJobs()
    with pytest.raises(ValueError, match="schedule 'nightly'") as raised:
        jobs.periodic("nightly", cron=cron)(lambda payload: None)
    assert problem in str(raised.value)
    assert "nightly" not in jobs.handlers
    assert "nightly" not in jobs.schedules


def test_a_zone_that_does_not_exist_raises_value_error_naming_it() -> None:
    jobs = SQSJobs()
    with pytest.raises(ValueError, match=r"schedule 'nightly'.*'Mars/Olympus'"):
        jobs.schedule("nightly", cron="0 3 * * *", timezone="Mars/Olympus")


def test_a_second_schedule_of_the_same_name_is_refused() -> None:
    jobs = SQSJobs()
    jobs.schedule("nightly", cron="0 3 * * *", job_type="report")
    with pytest.raises(ValueError, match="'nightly' is already declared"):
        jobs.schedule("nightly", cron="0 4 * * *", job_type="report")
    assert jobs.schedules["nightly"].cron == "0 3 * * *"


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "slash/name"])
def test_a_name_that_cannot_name_a_schedule_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="1-64 characters"):
        SQSJobs().schedule(name, cron="0 3 * * *")


def test_a_payload_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="schedule 'nightly': payload must be JSON"):
        SQSJobs().schedule("nightly", cron="0 3 * * *", payload={"at": object()})


def test_periodic_registers_the_handler_and_the_schedule() -> None:
    jobs = SQSJobs()

    @jobs.periodic(
        "nightly_report",
        cron="0 3 * * *",
        timezone="Europe/Berlin",
        queue="reports",
        payload={"kind": "daily"},
        catch_up=True,
    )
    def nightly_report(payload: dict[str, t.Any]) -> None: ...

    assert jobs.handlers["nightly_report"].func is nightly_report
    schedule = jobs.schedules["nightly_report"]
    assert (schedule.job_type, schedule.queue, schedule.payload, schedule.catch_up) == (
        "nightly_report",
        "reports",
        {"kind": "daily"},
        True,
    )
    after = dt.datetime(2026, 7, 1, 12, tzinfo=dt.UTC)
    assert schedule.next_times(2, after) == [
        dt.datetime(2026, 7, 2, 1, tzinfo=dt.UTC),  # 03:00 CEST
        dt.datetime(2026, 7, 3, 1, tzinfo=dt.UTC),
    ]


def test_schedule_takes_an_existing_handler_or_anything_naming_a_job_type() -> None:
    jobs = SQSJobs()

    class Task:
        name = "cleanup"

    assert jobs.schedule("a", cron="0 * * * *", job_type="report").job_type == "report"
    assert jobs.schedule("b", cron="0 * * * *", job_type=Task()).job_type == "cleanup"
    assert jobs.schedule("c", cron="0 * * * *").job_type == "c"


def test_fire_runs_the_next_ticks_job_in_eager_mode_with_scheduled_for() -> None:
    jobs = SQSJobs()
    seen: list[tuple[dict[str, t.Any], dt.datetime | None, str | None]] = []

    @jobs.periodic("nightly_report", cron="0 3 * * *", payload={"kind": "daily"})
    def nightly_report(payload: dict[str, t.Any]) -> None:
        payload["changed"] = True
        seen.append((payload, current_job.scheduled_for, current_job.job_id))

    app = eager_app(jobs)
    schedule = jobs.schedules["nightly_report"]
    expected_tick = schedule.next_times(1)[0]
    with app.app_context():
        job_id = schedule.fire()
    second = schedule.fire(app)

    assert [s[2] for s in seen] == [job_id, second]
    assert seen[0][0] == {"kind": "daily", "changed": True}
    assert seen[0][1] == expected_tick
    assert seen[0][1] is not None
    assert seen[0][1].utcoffset() == dt.timedelta(0)
    assert schedule.payload == {"kind": "daily"}  # the handler changed a copy


def test_an_unknown_scheduler_setting_is_refused() -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "q"}}, SQS_JOBS_SCHEDULER="cron"
    )
    with pytest.raises(ValueError, match='SQS_JOBS_SCHEDULER must be "embedded"'):
        SQSJobs(app)
