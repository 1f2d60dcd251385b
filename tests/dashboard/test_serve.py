"""``flask sqs-jobs dashboard``: loopback only; the standalone app it serves."""

from __future__ import annotations

import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.dashboard._serve import is_loopback
from flask_sqs_jobs.dashboard._serve import standalone_app

from .conftest import JSON

if t.TYPE_CHECKING:
    from flask import Flask
    from mypy_boto3_sqs.client import SQSClient


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_only_loopback_hosts_are_accepted(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "example.com"])
def test_the_command_refuses_a_host_others_can_reach(
    dashboard_app: Flask, host: str
) -> None:
    result = dashboard_app.test_cli_runner().invoke(
        args=["sqs-jobs", "dashboard", "--host", host]
    )

    assert result.exit_code == 2
    assert "is not a loopback address" in result.output
    assert "authorize=" in result.output


def test_the_standalone_app_serves_the_dashboard_at_the_root(
    dashboard_app: Flask, sqs: SQSClient
) -> None:
    jobs: SQSJobs = dashboard_app.extensions["sqs_jobs"]
    client = standalone_app(jobs, dashboard_app).test_client()

    data = client.get("/", headers=JSON).get_json()

    assert [q["queue"] for q in data["queues"]] == ["default", "other"]
    assert client.get("/queues/default/dead-letters").status_code == 200


def test_the_standalone_app_has_a_session_key_without_the_apps(
    make_dashboard_app: t.Any,
) -> None:
    app = make_dashboard_app(config={"SECRET_KEY": None})

    server_app = standalone_app(app.extensions["sqs_jobs"], app)

    assert len(server_app.secret_key or "") == 64
    page = server_app.test_client().get("/").get_data(as_text=True)
    assert "no <code>SECRET_KEY</code>" not in page
