"""SQS_JOBS_EAGER: enqueue_many runs every job, as docs/testing.md says."""

from __future__ import annotations

import re
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def app_config(app_config: dict[str, t.Any]) -> dict[str, t.Any]:
    return {**app_config, "SQS_JOBS_EAGER": True}


@pytest.fixture
def ran(jobs: SQSJobs) -> list[Payload]:
    payloads: list[Payload] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        payloads.append(payload)

    @jobs.handler("fail")
    def fail(payload: Payload) -> None:
        raise ConnectionError("mail server busy")

    return payloads


def test_every_job_runs_in_order_and_gets_a_message_id(
    app: Flask, jobs: SQSJobs, ran: list[Payload], sqs: SQSClient
) -> None:
    with app.app_context():
        ids = jobs.enqueue_many("default", [("record", {"n": n}) for n in range(25)])

    assert ran == [{"n": n} for n in range(25)]
    assert len(ids) == 25
    assert all(UUID.fullmatch(i) for i in ids)
    assert len(set(ids)) == 25


def test_a_wrong_job_raises_before_any_runs(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    with app.app_context(), pytest.raises(LookupError, match="'unknown'"):
        jobs.enqueue_many("default", [("record", {"n": 0}), ("unknown", {})])
    with app.app_context(), pytest.raises(ValueError, match=r"jobs\[1\]"):
        jobs.enqueue_many("default", [("record", {}), ("record", {"x": float("nan")})])

    assert ran == []


def test_a_handler_exception_propagates_and_later_jobs_do_not_run(
    app: Flask, jobs: SQSJobs, ran: list[Payload]
) -> None:
    batch = [("record", {"n": 0}), ("fail", {}), ("record", {"n": 2})]
    with app.app_context(), pytest.raises(ConnectionError, match="mail server busy"):
        jobs.enqueue_many("default", batch)

    assert ran == [{"n": 0}]
