"""@jobs.handler's idempotency options, the store they need, eager mode, sessions."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import SQSJobs

from tests.conftest import MakeApp
from tests.engine.helpers import events
from tests.idempotency.conftest import RunWorker

if t.TYPE_CHECKING:
    from structlog.typing import EventDict

Payload: t.TypeAlias = dict[str, t.Any]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"idempotency_ttl_seconds": 0, "idempotent": True}, ValueError, "positive"),
        (
            {"idempotency_ttl_seconds": float("nan"), "idempotent": True},
            ValueError,
            "finite",
        ),
        ({"idempotency_ttl_seconds": True, "idempotent": True}, ValueError, "True"),
        ({"idempotency_ttl_seconds": "60", "idempotent": True}, ValueError, "'60'"),
        ({"idempotent": "yes"}, TypeError, "True or False"),
        ({"idempotency_key": "order_id"}, TypeError, "function of the payload"),
        ({"idempotency_ttl_seconds": 60}, ValueError, "add idempotent=True"),
    ],
)
def test_bad_idempotency_options_are_refused_at_registration(
    jobs: SQSJobs, options: dict[str, t.Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        jobs.handler("charge", **options)
    assert "@jobs.handler('charge')" in str(raised.value)


def test_a_key_function_implies_idempotent(jobs: SQSJobs) -> None:
    @jobs.handler("charge", idempotency_key=lambda payload: "k")
    def charge(payload: Payload) -> None:
        pass

    assert jobs.handlers["charge"].idempotent
    assert jobs.handlers["charge"].idempotency_ttl_seconds == 86_400


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        (lambda payload: "", "returned ''"),
        (lambda payload: 42, "returned 42"),
        (lambda payload: "x" * 256, "at most 255"),
        (lambda payload: payload["missing"], "raised KeyError"),
    ],
)
def test_a_bad_key_at_run_time_fails_the_job_without_retry(
    store_app: Flask,
    jobs: SQSJobs,
    run_worker: RunWorker,
    log_events: list[EventDict],
    key: t.Callable[[Payload], str],
    shown: str,
) -> None:
    runs: list[Payload] = []
    jobs.handler("charge", idempotency_key=key)(runs.append)
    with store_app.app_context():
        jobs.enqueue("default", "charge", {})
    finished = run_worker(lambda f: f.count() >= 1)

    assert finished.values() == ["delete"]
    assert runs == []
    [line] = events(log_events, "job_finished")
    assert line["error_type"] == "NonRetryableError"
    assert shown in str(line["exc_info"])
    assert "idempotency_key function of job type 'charge'" in str(line["exc_info"])


def test_the_worker_command_without_a_store_exits_2_naming_the_setting(
    make_app: MakeApp, jobs: SQSJobs
) -> None:
    @jobs.handler("charge", idempotent=True)
    def charge(payload: Payload) -> None:
        pass

    app = make_app()
    result = app.test_cli_runner().invoke(args=["sqs-worker"])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "SQS_JOBS_STORE_URL" in line
    assert "'charge'" in line


def test_create_worker_without_a_store_refuses_idempotent_handlers(
    make_app: MakeApp, jobs: SQSJobs
) -> None:
    jobs.handler("charge", idempotent=True)(lambda payload: None)
    app = make_app()
    with pytest.raises(ValueError, match="SQS_JOBS_STORE_URL"):
        jobs.create_worker(app)


def test_current_job_session_without_a_store_names_the_setting(
    make_app: MakeApp, app_config: dict[str, t.Any], jobs: SQSJobs
) -> None:
    @jobs.handler("peek")
    def peek(payload: Payload) -> None:
        current_job.session  # noqa: B018 - the access is what is tested

    app = make_app({**app_config, "SQS_JOBS_EAGER": True})
    with app.app_context(), pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.enqueue("default", "peek")


def test_eager_mode_with_a_store_runs_a_job_id_once(
    make_app: MakeApp,
    app_config: dict[str, t.Any],
    jobs: SQSJobs,
    store_url: str,
) -> None:
    runs: list[Payload] = []
    jobs.handler("charge", idempotent=True)(runs.append)
    app = make_app(
        {**app_config, "SQS_JOBS_EAGER": True, "SQS_JOBS_STORE_URL": store_url}
    )
    jobs.store(app).create_tables()
    with app.app_context():
        jobs.enqueue("default", "charge", {"n": 1}, job_id="once")
        jobs.enqueue("default", "charge", {"n": 1}, job_id="once")
        with pytest.raises(NonRetryableError, match="different payload"):
            jobs.enqueue("default", "charge", {"n": 2}, job_id="once")
    assert runs == [{"n": 1}]
    jobs.store(app).close()


def test_eager_mode_without_a_store_runs_idempotent_handlers_plainly(
    make_app: MakeApp, app_config: dict[str, t.Any], jobs: SQSJobs
) -> None:
    runs: list[Payload] = []
    jobs.handler("charge", idempotent=True)(runs.append)
    app = make_app({**app_config, "SQS_JOBS_EAGER": True})
    with app.app_context():
        jobs.enqueue("default", "charge", {}, job_id="twice")
        jobs.enqueue("default", "charge", {}, job_id="twice")
    assert len(runs) == 2


notes = sa.Table("notes", sa.MetaData(), sa.Column("text", sa.String(50)))


def test_a_plain_handlers_session_commits_on_success_and_not_on_failure(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    engine = jobs.store(store_app).engine  # type: ignore[attr-defined]
    notes.create(engine)

    @jobs.handler("note")
    def note(payload: Payload) -> None:
        current_job.session.execute(notes.insert().values(text=payload["text"]))
        if payload["fail"]:
            raise NonRetryableError("no")

    with store_app.app_context():
        jobs.enqueue("default", "note", {"text": "kept", "fail": False})
        jobs.enqueue("default", "note", {"text": "dropped", "fail": True})
    finished = run_worker(lambda f: f.count() >= 2)

    assert sorted(finished.values()) == ["delete", "success"]
    with engine.connect() as connection:
        assert connection.execute(sa.select(notes.c.text)).scalars().all() == ["kept"]
