"""``flask sqs-jobs job`` and ``flask sqs-jobs workers``: what an operator sees."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import WorkerRecord
from flask_sqs_jobs.store.model._records import JobEvent

from tests.conftest import MakeApp

HOSTILE = "evil\x1b[2J\nFAKE: line\u202e"
NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def app(
    make_app: MakeApp, jobs: SQSJobs, app_config: dict[str, t.Any], tmp_path: t.Any
) -> t.Iterator[Flask]:
    app = make_app(
        {**app_config, "SQS_JOBS_STORE_URL": f"sqlite:///{tmp_path / 'j.db'}"}
    )
    store = jobs.store(app)
    store.create_tables()
    store.job_records().write(
        [
            JobEvent(
                "job-1",
                HOSTILE,
                "default",
                "failed",
                2,
                NOW,
                error=f"RuntimeError: {HOSTILE}",
                result=json.dumps({"text": HOSTILE}),
            )
        ]
    )
    yield app
    store.close()


def invoke(app: Flask, *args: str) -> t.Any:
    return app.test_cli_runner().invoke(args=["sqs-jobs", *args])


def test_job_prints_the_record_with_hostile_text_escaped(app: Flask) -> None:
    result = invoke(app, "job", "job-1")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    lines = result.output.splitlines()
    assert "status: failed" in lines
    assert "attempts: 2" in lines
    assert "job_type: evil\\x1b[2J\\nFAKE: line\\u202e" in lines
    assert "\u202e" not in result.output
    assert not any(line.startswith("FAKE") for line in lines)


def test_job_json_is_ascii_json(app: Flask) -> None:
    result = invoke(app, "job", "job-1", "--json")
    assert result.exit_code == 0, result.output
    assert result.output.isascii()
    record = json.loads(result.output)
    assert (record["job_type"], record["result"], record["status"]) == (
        HOSTILE,
        {"text": HOSTILE},
        "failed",
    )


def test_an_unknown_job_exits_1_with_one_clear_line(app: Flask) -> None:
    result = invoke(app, "job", "no-such-job")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: no record of job no-such-job: never recorded, or pruned after"
        " SQS_JOBS_RECORD_RETENTION_SECONDS"
    )


def test_workers_shows_live_and_lost_workers(app: Flask, jobs: SQSJobs) -> None:
    registry = jobs.store(app).worker_registry()
    now = dt.datetime.now(dt.UTC)
    old = now - dt.timedelta(minutes=5)
    registry.register(
        WorkerRecord("h:1:aa", "h", 1, ("default",), 4, 3, now, now, "1.0")
    )
    registry.register(
        WorkerRecord(f"h:2:{HOSTILE}", "h", 2, ("critical",), 1, 0, old, old, "1.0")
    )
    result = invoke(app, "workers")
    assert result.exit_code == 0, result.output
    header, lost, live = result.output.splitlines()
    assert header.split()[:3] == ["WORKER", "STATE", "QUEUES"]
    assert live.split()[:4] == ["h:1:aa", "live", "default", "3/4"]
    assert "lost" in lost.split()
    assert "\x1b" not in result.output
    as_json = json.loads(invoke(app, "workers", "--json").output)["workers"]
    assert [(w["pid"], w["state"]) for w in as_json] == [(2, "lost"), (1, "live")]


def test_no_store_is_a_usage_error_naming_the_setting(
    make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    app = make_app(app_config)
    for command in (["job", "x"], ["workers"]):
        result = invoke(app, *command)
        assert result.exit_code == 2
        assert "SQS_JOBS_STORE_URL" in result.output
