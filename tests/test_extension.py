"""SQSJobs: binding to apps, the handler registry, the client, enqueueing anywhere."""

from __future__ import annotations

import json
import pathlib
import threading
import typing as t

import boto3
import click
import pytest
from flask import Flask
from flask import g
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine import UnknownQueueError
from flask_sqs_jobs.testing import record_finished
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.flask_helpers import only_sent_job
from tests.flask_helpers import sent_jobs
from tests.support import create_queue
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from flask.ctx import _AppCtxGlobals
    from flask.testing import FlaskClient
    from flask.testing import FlaskCliRunner
    from mypy_boto3_sqs.client import SQSClient

Payload: t.TypeAlias = dict[str, t.Any]


def noop(payload: Payload) -> None:
    pass


# -- binding to apps -------------------------------------------------------------


def test_init_app_stores_the_extension_in_app_extensions(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    assert bare_app.extensions["sqs_jobs"] is jobs


def test_passing_the_app_to_the_constructor_binds_it(
    app_config: dict[str, t.Any],
) -> None:
    app = Flask(__name__)
    app.config.update(app_config)

    jobs = SQSJobs(app)

    assert app.extensions["sqs_jobs"] is jobs


def test_a_second_init_app_on_the_same_app_raises_runtime_error(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with pytest.raises(RuntimeError, match="already initialised on this app") as info:
        jobs.init_app(bare_app)

    assert "use the existing SQSJobs instance" in str(info.value)
    assert bare_app.extensions["sqs_jobs"] is jobs


def test_a_second_extension_on_the_same_app_raises_runtime_error(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with pytest.raises(RuntimeError, match="already initialised on this app"):
        SQSJobs(bare_app)

    assert bare_app.extensions["sqs_jobs"] is jobs


def test_one_extension_serves_several_apps_each_with_its_own_queues(
    sqs: SQSClient, make_app: MakeApp, jobs: SQSJobs
) -> None:
    first_url = create_queue(sqs, "first")
    second_url = create_queue(sqs, "second")
    first = make_app({"SQS_JOBS_QUEUES": {"default": {"name": "first"}}})
    second = make_app({"SQS_JOBS_QUEUES": {"default": {"name": "second"}}})

    with first.app_context():
        jobs.enqueue("default", "noop", {"app": "first"})
    with second.app_context():
        jobs.enqueue("default", "noop", {"app": "second"})

    assert only_sent_job(sqs, first_url).payload == {"app": "first"}
    assert only_sent_job(sqs, second_url).payload == {"app": "second"}


def test_enqueue_in_an_app_the_extension_is_not_bound_to_raises(
    bare_app: Flask,
) -> None:
    other = SQSJobs()

    with (
        bare_app.app_context(),
        pytest.raises(RuntimeError, match=r"not initialised on this app; call"),
    ):
        other.enqueue("default", "noop")


# -- the boto3 client --------------------------------------------------------------


def _forget_the_region(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Leave boto3 no way to find a region or credentials."""
    for name in (
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SECURITY_TOKEN",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_init_app_needs_no_region_nor_credentials_the_first_enqueue_makes_the_client(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
    app_config: dict[str, t.Any],
) -> None:
    """The client is created on first use, not at ``init_app``: the missing
    region is only reported, with the setting to fix, when a job is sent."""
    _forget_the_region(monkeypatch, tmp_path)
    app = Flask(__name__)
    app.config.update(app_config)
    jobs = SQSJobs()

    jobs.init_app(app)

    with app.app_context(), pytest.raises(ValueError, match="SQS_JOBS_REGION_NAME"):
        jobs.enqueue("default", "noop")


def test_the_client_uses_the_configured_region(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
    sqs: SQSClient,
    make_app: MakeApp,
    jobs: SQSJobs,
) -> None:
    ireland = boto3.client("sqs", region_name="eu-west-1")
    url = create_queue(ireland, "app-default")
    app = make_app(
        {
            "SQS_JOBS_QUEUES": {"default": {"name": "app-default"}},
            "SQS_JOBS_REGION_NAME": "eu-west-1",
        }
    )
    _forget_the_region(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

    with app.app_context():
        message_id = jobs.enqueue("default", "noop", {"n": 1})

    assert only_sent_job(ireland, url).message_id == message_id


def test_a_client_passed_to_the_constructor_is_used_instead_of_one_from_config(
    sqs: SQSClient, make_app: MakeApp, app_config: dict[str, t.Any]
) -> None:
    """The app's region is us-east-1; the given client's is eu-west-1."""
    ireland = boto3.client("sqs", region_name="eu-west-1")
    url = create_queue(ireland, "app-default")
    jobs = SQSJobs(boto_client=ireland)
    app = make_app(extension=jobs)

    with app.app_context():
        message_id = jobs.enqueue("default", "noop")

    assert jobs.client(app) is ireland
    assert only_sent_job(ireland, url).message_id == message_id


@pytest.mark.parametrize("configured_wait", [0, 20])
def test_the_client_outwaits_the_longest_long_poll_whatever_the_config_says(
    make_app: MakeApp,
    app_config: dict[str, t.Any],
    jobs: SQSJobs,
    configured_wait: int,
) -> None:
    """``--idle-wait 20`` with ``SQS_JOBS_IDLE_WAIT_SECONDS = 0`` long-polls 20 s
    with the app's one client: a read timeout cut to the config would fail
    every idle poll, and ten failures make the worker exit 1."""
    app = make_app({**app_config, "SQS_JOBS_IDLE_WAIT_SECONDS": configured_wait})

    worker = jobs.create_worker(app, idle_wait_seconds=20)

    assert worker._idle_wait == 20
    client = jobs.queue_group(app).queue("default").client
    assert client is jobs.client(app)
    read_timeout: float = getattr(client.meta.config, "read_timeout")  # noqa: B009 - not in the stubs
    assert read_timeout >= 20 + 10


def test_the_client_is_created_once_per_app(bare_app: Flask, jobs: SQSJobs) -> None:
    assert jobs.client(bare_app) is jobs.client(bare_app)


# -- handlers ----------------------------------------------------------------------


def test_the_handler_decorator_returns_the_function_unchanged(jobs: SQSJobs) -> None:
    def send_email(payload: Payload) -> str:
        return f"sent to {payload['to']}"

    decorated = jobs.handler("send_email")(send_email)

    assert decorated is send_email
    assert decorated({"to": "ada"}) == "sent to ada"


def test_a_second_handler_for_a_job_type_raises_naming_the_first(
    jobs: SQSJobs,
) -> None:
    jobs.handler("send_email")(noop)

    def other(payload: Payload) -> None:
        pass

    with pytest.raises(ValueError, match="'send_email' already has a handler") as info:
        jobs.handler("send_email")(other)

    assert "tests.test_extension.noop" in str(info.value)


def test_registering_the_same_function_again_is_allowed(jobs: SQSJobs) -> None:
    """A module imported twice registers its handlers twice."""
    jobs.handler("send_email")(noop)

    assert jobs.handler("send_email")(noop) is noop


@pytest.mark.parametrize("job_type", ["", None, 3])
def test_a_job_type_that_is_not_a_non_empty_str_is_refused(
    jobs: SQSJobs, job_type: t.Any
) -> None:
    with pytest.raises(ValueError, match="job_type must be a non-empty str"):
        jobs.handler(job_type)


def test_handlers_registered_after_init_app_are_run_by_the_worker(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    ran: list[Payload] = []

    @jobs.handler("late")
    def late(payload: Payload) -> None:
        ran.append(payload)

    with bare_app.app_context():
        jobs.enqueue("default", "late", {"n": 1})
    finished = work_off(bare_app)

    assert [f.outcome for f in finished] == ["success"]
    assert ran == [{"n": 1}]


# -- enqueueing from anywhere the app is current -----------------------------------


def test_enqueue_from_a_view_sends_the_job_and_returns_its_message_id(
    app: Flask, client: FlaskClient, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    @app.post("/signup")
    def signup() -> dict[str, str]:
        return {"queued": jobs.enqueue("default", "welcome", {"user_id": 42})}

    response = client.post("/signup")

    job = only_sent_job(sqs, queue_urls["default"])
    assert response.status_code == 200
    assert response.json == {"queued": job.message_id}
    assert (job.job_type, job.payload) == ("welcome", {"user_id": 42})


def test_enqueue_from_a_cli_command_sends_the_job_without_a_request_id(
    bare_app: Flask,
    runner: FlaskCliRunner,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: t.Any,
) -> None:
    @bare_app.cli.command("invite")
    @click.argument("email")
    def invite(email: str) -> None:
        click.echo(jobs.enqueue("critical", "invite", {"email": email}))

    result = runner.invoke(args=["invite", "ada@example.com"])

    assert result.exit_code == 0, result.output
    job = only_sent_job(sqs, queue_urls["critical"])
    assert result.output.splitlines()[-1] == job.message_id
    assert job.payload == {"email": "ada@example.com"}
    assert "request_id" not in job.correlation_fields


def test_enqueue_in_an_app_context_like_the_shell_sends_the_job(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    with bare_app.app_context():
        message_id = jobs.enqueue(
            "default",
            "rebuild",
            {"day": "2024-06-01"},
            correlation_fields={"by": "ops"},
        )

    job = only_sent_job(sqs, queue_urls["default"])
    assert job.message_id == message_id
    assert job.correlation_fields == {"by": "ops"}


def test_enqueue_and_enqueue_many_send_the_callers_job_id(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    with bare_app.app_context():
        message_id = jobs.enqueue("default", "rebuild", job_id="day:2024-06-01")
        jobs.enqueue_many(
            "critical",
            [{"job_type": "rebuild", "job_id": "many-1"}, ("rebuild", None)],
        )

    [message] = visible_messages(sqs, queue_urls["default"])
    assert message["MessageId"] == message_id
    assert json.loads(message["Body"])["job_id"] == "day:2024-06-01"
    job_ids = sorted(
        json.loads(m["Body"])["job_id"]
        for m in visible_messages(sqs, queue_urls["critical"])
    )
    assert len(job_ids) == 2
    assert "many-1" in job_ids


@pytest.mark.parametrize("job_id", ["", "x" * 129, "a b", "a/b", 1])
def test_enqueue_refuses_an_invalid_job_id_and_sends_nothing(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any, job_id: object
) -> None:
    with bare_app.app_context():
        with pytest.raises((TypeError, ValueError), match="job_id"):
            jobs.enqueue("default", "rebuild", job_id=t.cast(t.Any, job_id))
        with pytest.raises((TypeError, ValueError), match=r"jobs\[0\]: job_id"):
            jobs.enqueue_many("default", [{"job_type": "rebuild", "job_id": job_id}])

    assert visible_messages(sqs, queue_urls["default"]) == []


def test_enqueue_through_current_app_extensions_works_like_the_instance(
    bare_app: Flask, sqs: SQSClient, queue_urls: t.Any
) -> None:
    from flask import current_app

    with bare_app.app_context():
        current_app.extensions["sqs_jobs"].enqueue("default", "rebuild")

    assert only_sent_job(sqs, queue_urls["default"]).job_type == "rebuild"


def test_enqueue_outside_an_app_context_raises_flasks_own_error(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with pytest.raises(RuntimeError, match="Working outside of application context"):
        jobs.enqueue("default", "noop")


def test_enqueue_to_an_unknown_queue_raises_naming_the_configured_ones(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    with bare_app.app_context(), pytest.raises(UnknownQueueError) as info:
        jobs.enqueue("reports", "noop")

    assert str(info.value) == (
        "unknown queue 'reports'; the configured queues are: 'default', 'critical'"
    )


def test_an_invalid_job_is_refused_before_anything_is_sent(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    with bare_app.app_context(), pytest.raises(TypeError, match="payload"):
        jobs.enqueue("default", "noop", {"when": object()})

    assert sent_jobs(sqs, queue_urls["default"]) == []


# -- each job in its own app context -----------------------------------------------


def test_each_job_runs_in_its_own_app_context_torn_down_after_it(
    app: Flask, jobs: SQSJobs
) -> None:
    """``teardown_appcontext`` runs once per job (the test's own context, pushed
    by pytest-flask, stays), and each job gets a fresh ``g``."""
    teardowns: list[t.Any] = []
    seen: list[tuple[_AppCtxGlobals, object]] = []

    @app.teardown_appcontext
    def count(exc: BaseException | None) -> None:
        teardowns.append(g.get("job"))

    @jobs.handler("mark")
    def mark(payload: Payload) -> None:
        seen.append((g._get_current_object(), g.get("job")))
        g.job = payload["n"]

    g.job = "the test's"
    for n in range(3):
        jobs.enqueue("default", "mark", {"n": n})
    finished = work_off(app)

    assert [f.outcome for f in finished] == ["success"] * 3
    assert sorted(teardowns) == [0, 1, 2]
    job_gs = [job_g for job_g, _ in seen]
    assert [before for _, before in seen] == [None, None, None]
    assert len({id(job_g) for job_g in job_gs}) == 3
    assert g._get_current_object() not in job_gs
    assert g.job == "the test's"


def test_teardown_appcontext_sees_the_exception_of_a_failed_job(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    teardowns: list[BaseException | None] = []
    error = RuntimeError("mail server down")

    @bare_app.teardown_appcontext
    def record(exc: BaseException | None) -> None:
        teardowns.append(exc)

    @jobs.handler("fail")
    def fail(payload: Payload) -> None:
        raise error

    with bare_app.app_context():
        jobs.enqueue("default", "fail")
    teardowns.clear()  # the enqueueing context above
    finished = work_off(bare_app)

    assert [f.outcome for f in finished] == ["retry"]
    assert teardowns == [error]


def test_a_worker_built_by_create_worker_polls_only_the_queues_asked_for(
    bare_app: Flask, jobs: SQSJobs, sqs: SQSClient, queue_urls: t.Any
) -> None:
    ran: list[str] = []

    @jobs.handler("record")
    def record(payload: Payload) -> None:
        ran.append(payload["queue"])

    with bare_app.app_context():
        jobs.enqueue("default", "record", {"queue": "default"})
        jobs.enqueue("critical", "record", {"queue": "critical"})
    finished = work_off(bare_app, queues=["critical"])

    assert [f.job.queue for f in finished] == ["critical"]
    assert ran == ["critical"]
    assert len(sent_jobs(sqs, queue_urls["default"])) == 1


def test_with_concurrency_jobs_running_at_once_each_have_their_own_g(
    bare_app: Flask, jobs: SQSJobs
) -> None:
    """Both jobs wait for each other, so they run at the same time, in threads."""
    both_running = threading.Barrier(2, timeout=10)
    seen: list[tuple[int, object]] = []

    @jobs.handler("mark")
    def mark(payload: Payload) -> None:
        g.job = payload["n"]
        both_running.wait()
        seen.append((payload["n"], g.job))

    with bare_app.app_context():
        jobs.enqueue("default", "mark", {"n": 1})
        jobs.enqueue("default", "mark", {"n": 2})
    with record_finished(bare_app) as finished:
        worker = jobs.create_worker(
            bare_app,
            concurrency=2,
            idle_wait_seconds=0,
            should_stop=lambda: len(finished) >= 2,
        )
        assert worker.run() == 0

    assert [f.outcome for f in finished] == ["success", "success"]
    assert sorted(seen) == [(1, 1), (2, 2)]
