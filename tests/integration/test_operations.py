"""Failure handling and operations with real ``flask sqs-worker`` processes.

Retry backoff, dead letters through ``flask sqs-jobs dlq``, deferral of
``run_at`` jobs, ``--shutdown-timeout``, and the health server's ``/healthz``,
``/status`` and ``/metrics``.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import http.client
import json
import pathlib
import signal
import subprocess
import time
import typing as t

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.faults.proxy import FaultProxy
from tests.support import message_count

from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import log_time
from .helpers import producer
from .helpers import read_records
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: ``--health-max-age`` of the health tests: above the 1 s idle wait of the
#: test app, so an idle worker completes a receive well within it.
MAX_AGE = 3


class AppEnv(t.Protocol):
    def __call__(
        self,
        queues: cabc.Mapping[str, str],
        *,
        endpoint: str | None = None,
        **options: t.Any,
    ) -> dict[str, str]: ...


@pytest.fixture
def app_env(sqs_endpoint: str, record_file: pathlib.Path) -> AppEnv:
    """The test app's settings for queues given as logical name -> queue URL.

    ``options`` are added to every queue's definition (``retry_backoff_seconds``).
    """

    def make(
        queues: cabc.Mapping[str, str],
        *,
        endpoint: str | None = None,
        **options: t.Any,
    ) -> dict[str, str]:
        definitions = {
            logical: {"name": url.rsplit("/", 1)[-1], **options}
            for logical, url in queues.items()
        }
        return {
            "TEST_APP_ENDPOINT": endpoint or sqs_endpoint,
            "TEST_APP_QUEUES": json.dumps(definitions),
            "TEST_APP_RECORD_FILE": str(record_file),
        }

    return make


class StartWorker(t.Protocol):
    def __call__(self, env: cabc.Mapping[str, str], *args: str) -> WorkerProcess: ...


@pytest.fixture
def start_flask_worker() -> cabc.Iterator[StartWorker]:
    """Start ``flask sqs-worker ARGS`` for the test app; wait until it polls.

    Every process is killed (if still running) and reaped afterwards.
    """
    started: list[WorkerProcess] = []

    def start(env: cabc.Mapping[str, str], *args: str) -> WorkerProcess:
        process = WorkerProcess(
            flask_command("sqs-worker", *args), env=subprocess_env(env), cwd=ROOT
        )
        started.append(process)
        process.wait_for("worker_started", timeout=30)
        return process

    yield start
    for process in started:
        process.close()


def stop(worker: WorkerProcess) -> None:
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def run_cli(env: cabc.Mapping[str, str], *args: str) -> str:
    """Run ``flask sqs-jobs ARGS`` as an operator would; return what it printed."""
    environment = subprocess_env(env)
    del environment["TEST_APP_JSON_LOGS"]
    result = subprocess.run(
        flask_command("sqs-jobs", *args),
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    return result.stdout


def job_records(record_file: pathlib.Path) -> list[dict[str, t.Any]]:
    return [r for r in read_records(record_file) if r["kind"] == "job"]


# -- retries, dead letters, deferral ------------------------------------------------


def first_visible_at(client: SQSClient, url: str, timeout: float) -> float:
    """Poll the queue without hiding anything; return when a message was first seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0, WaitTimeSeconds=0
        )
        if response.get("Messages"):
            return time.time()
        time.sleep(0.05)
    raise AssertionError(f"no message became visible on {url} within {timeout} s")


def test_a_failed_job_stays_hidden_for_its_retry_backoff(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
) -> None:
    """With ``retry_backoff_seconds`` 2 the first failure hides the job for 2 to
    4 s, much less than the queue's 30 s visibility timeout."""
    url = make_queue("backoff", visibility_timeout=30)
    worker = start_flask_worker(
        app_env({"default": url}, retry_backoff_seconds=2), "--idle-wait", "1"
    )

    message_id = producer(sqs_client, default=url).enqueue("default", "fail", {})
    started = worker.wait_for("job_started", message_id=message_id)
    finished = worker.wait_for("job_finished", message_id=message_id)
    # Stop the worker so that the test is the one to see the message come back.
    worker.send_signal(signal.SIGTERM)
    visible_at = first_visible_at(sqs_client, url, timeout=15)

    assert worker.wait() == 0
    assert finished["outcome"] == "retry"
    assert 2 <= finished["retry_in_seconds"] <= 4
    # The visibility was set between the job's start and its finish.
    assert visible_at - log_time(started) >= 2
    assert visible_at - log_time(finished) <= 4 + 1.5


def test_a_dead_letter_is_listed_and_redriven_with_the_cli_and_then_runs(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    dlq = make_queue("dlq")
    url = make_queue(visibility_timeout=1, dead_letter_url=dlq, max_receive_count=2)
    env = app_env({"default": url})
    fixed = tmp_path / "fixed"
    worker = start_flask_worker(env)

    original = producer(sqs_client, default=url).enqueue(
        "default",
        "fixable",
        {"fixed": str(fixed)},
        correlation_fields={"request_id": "r-1"},
    )
    worker.wait_for("job_finished", message_id=original, outcome="retry")
    moved = worker.wait_for("job_finished", message_id=original, count=2, timeout=20)
    assert (moved["outcome"], moved["receive_count"]) == ("dead_lettered", 2)
    assert message_count(sqs_client, url) == 0

    report = json.loads(run_cli(env, "dlq", "list", "default", "--json"))
    [letter] = report["dead_letters"]
    reason = letter["dead_letter"]
    assert letter["message_id"] != original
    assert (letter["job_type"], letter["payload"]) == ("fixable", {"fixed": str(fixed)})
    assert {k: v for k, v in reason.items() if k != "failed_at"} == {
        "error_type": "RuntimeError",
        "error": "not fixed yet",
        "source_queue": "default",
        "receive_count": 2,
    }
    failed_at = dt.datetime.fromisoformat(reason["failed_at"])
    assert abs(failed_at.timestamp() - log_time(moved)) < 5

    assert run_cli(env, "dlq", "list", "default").splitlines() == [
        f"{letter['message_id']}  job_type=fixable",
        f"  reason: RuntimeError: not fixed yet (failed {reason['failed_at']},"
        " receive 2, from default)",
        f"  payload: {json.dumps({'fixed': str(fixed)})}",
    ]
    assert message_count(sqs_client, dlq) == 1, "listing consumed the dead letter"

    fixed.touch()
    assert run_cli(env, "dlq", "redrive", "default") == (
        "moved 1 dead letter(s) back to 'default'; 0 left\n"
    )

    done = worker.wait_for("job_finished", outcome="success", job_type="fixable")
    assert done["receive_count"] == 1
    assert done["request_id"] == "r-1"
    assert done["message_id"] not in (original, letter["message_id"])
    assert len(job_records(record_file)) == 3
    assert message_count(sqs_client, dlq) == 0
    assert message_count(sqs_client, url) == 0
    stop(worker)


def test_a_job_due_in_two_hours_is_sent_again_delayed_and_not_run(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """Another producer sends a ``run_at`` job without a delay: the worker
    re-sends it with the longest delay SQS allows and deletes the original."""
    url = make_queue("deferred", visibility_timeout=30)
    run_at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    original = sqs_client.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {
                "job_type": "record",
                "payload": {"n": 1},
                "run_at": run_at.isoformat(timespec="milliseconds").replace(
                    "+00:00", "Z"
                ),
            }
        ),
    )["MessageId"]
    worker = start_flask_worker(app_env({"default": url}))

    finished = worker.wait_for("job_finished", message_id=original)
    stop(worker)

    assert finished["outcome"] == "deferred"
    assert finished["new_message_id"] not in ("", original)
    assert dt.datetime.fromisoformat(finished["run_at"]) == run_at.replace(
        microsecond=run_at.microsecond // 1000 * 1000
    )
    assert worker.find("job_started") == []
    assert job_records(record_file) == []
    attributes = sqs_client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    assert {k: int(v) for k, v in attributes.items()} == {
        "ApproximateNumberOfMessages": 0,
        "ApproximateNumberOfMessagesNotVisible": 0,
        "ApproximateNumberOfMessagesDelayed": 1,
    }


def test_shutdown_timeout_hands_a_stuck_job_to_another_worker_at_once(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """The first worker gives its job 1 s after SIGTERM, sets its
    ``abort_requested``, releases its message and exits 0; the second worker
    runs the job long before the 60 s visibility timeout would have ended."""
    url = make_queue("stuck", visibility_timeout=60)
    env = app_env({"default": url})
    release = tmp_path / "release"
    first = start_flask_worker(env, "--shutdown-timeout", "1")
    message_id = producer(sqs_client, default=url).enqueue(
        "default", "abortable", {"release": str(release)}
    )
    first.wait_for("abortable_started", message_id=message_id)
    second = start_flask_worker(env)

    first.send_signal(signal.SIGTERM)

    assert first.wait() == 0
    stopping = first.wait_for("worker_stopping")
    reached = first.wait_for("shutdown_timeout_reached")
    assert (reached["timeout_seconds"], reached["abandoned"]) == (1.0, 1)
    assert log_time(reached) - log_time(stopping) >= 0.9
    assert first.find("abort_requested_seen", message_id=message_id)
    assert first.wait_for("messages_released")["count"] == 1
    assert first.find("job_finished", message_id=message_id, outcome="heartbeat_failed")

    again = second.wait_for(
        "abortable_started", message_id=message_id, receive_count=2, timeout=20
    )
    assert log_time(again) - log_time(reached) < 10
    release.touch()
    second.wait_for("job_finished", message_id=message_id, outcome="success")
    stop(second)
    assert [r["message_id"] for r in job_records(record_file)] == [message_id]
    assert message_count(sqs_client, url) == 0


# -- health and metrics --------------------------------------------------------------


def get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` from the worker's health server: (status, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def status(port: int) -> dict[str, t.Any]:
    code, body = get(port, "/status")
    report: dict[str, t.Any] = json.loads(body)
    assert code == (200 if report["healthy"] else 503)
    return report


Labels: t.TypeAlias = frozenset[tuple[str, str]]


def metrics(port: int) -> dict[tuple[str, Labels], float]:
    """The samples ``/metrics`` serves: (name, labels) -> value."""
    code, body = get(port, "/metrics")
    assert code == 200, body
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def labels(**values: str) -> Labels:
    return frozenset(values.items())


def wait_until_idle(port: int) -> dict[tuple[str, Labels], float]:
    """Poll ``/metrics`` until no job runs; return those metrics."""
    scraped: dict[tuple[str, Labels], float] = {}

    def idle() -> bool:
        scraped.update(metrics(port))
        return scraped[("sqs_jobs_busy_slots", labels())] == 0

    wait_until(idle, 10, lambda: f"sqs_jobs_busy_slots 0; metrics: {scraped}")
    return scraped


def wait_until_counted(
    port: int, expected: dict[tuple[str, Labels], float]
) -> dict[tuple[str, Labels], float]:
    """Poll ``/metrics`` until each of ``expected`` reaches its value and no job
    runs; return those metrics (checked by the caller)."""
    scraped: dict[tuple[str, Labels], float] = {}

    def counted() -> bool:
        scraped.clear()
        scraped.update(metrics(port))
        reached = all(scraped.get(key, 0) >= value for key, value in expected.items())
        return reached and scraped[("sqs_jobs_busy_slots", labels())] == 0

    wait_until(counted, 10, lambda: f"{expected} in the metrics: {scraped}")
    return scraped


def health_port(worker: WorkerProcess) -> int:
    return int(worker.wait_for("health_server_started")["port"])


def healthz_while(
    port: int, condition: cabc.Callable[[], bool], timeout: float
) -> set[int]:
    """Probe ``/healthz`` until ``condition`` holds; return the statuses seen."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"still waiting after {timeout} s; /healthz saw {seen}"
            )
        code, body = get(port, "/healthz")
        seen.add(code)
        assert (code, body) == (200, "ok") or code == 503, (code, body)
        time.sleep(0.1)
    return seen


def test_healthz_fails_while_sqs_is_unreachable_and_recovers(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
) -> None:
    url = make_queue("health")
    with FaultProxy(sqs_endpoint) as proxy:
        worker = start_flask_worker(
            app_env({"default": url}, endpoint=proxy.endpoint),
            "--health-port",
            "0",
            "--health-max-age",
            str(MAX_AGE),
            "--idle-wait",
            "1",
        )
        port = health_port(worker)
        idle_since = time.monotonic()

        # Idle for longer than the max age: its empty receives keep it healthy.
        seen = healthz_while(
            port, lambda: time.monotonic() - idle_since > MAX_AGE + 1.5, timeout=10
        )
        assert seen == {200}
        assert status(port)["queues"] == {
            "default": {"consecutive_receive_failures": 0, "last_error": None}
        }

        proxy.refuse()
        # The receive in flight fails once botocore has given up retrying it.
        wait_until(
            lambda: (
                get(port, "/healthz")[0] == 503
                and status(port)["queues"]["default"]["consecutive_receive_failures"]
                > 0
            ),
            20,
            lambda: str(status(port)),
        )
        code, reason = get(port, "/healthz")
        down = status(port)
        errors = metrics(port)[
            ("sqs_jobs_receive_errors_total", labels(queue="default"))
        ]

        proxy.restore()
        wait_until(
            lambda: get(port, "/healthz") == (200, "ok"), 30, lambda: str(status(port))
        )
        up = status(port)
        stop(worker)

    assert code == 503
    assert reason.startswith("no receive completed for ")
    assert reason.endswith(f" s (limit {MAX_AGE} s)")
    assert down["healthy"] is False
    assert down["reason"].startswith("no receive completed for ")
    assert down["last_receive_age_seconds"] > MAX_AGE
    failing = down["queues"]["default"]
    assert failing["consecutive_receive_failures"] >= 1
    assert failing["last_error"]
    assert errors >= 1
    assert worker.find("receive_failed", queue="default")
    assert up["healthy"] is True
    assert up["queues"]["default"]["consecutive_receive_failures"] == 0
    assert worker.find("receive_recovered", queue="default")


def test_metrics_count_outcomes_and_a_long_job_keeps_the_worker_healthy(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    app_env: AppEnv,
    start_flask_worker: StartWorker,
    tmp_path: pathlib.Path,
) -> None:
    url = make_queue("metrics", visibility_timeout=30)
    worker = start_flask_worker(
        app_env({"default": url}),
        "--health-port",
        "0",
        "--health-max-age",
        str(MAX_AGE),
    )
    port = health_port(worker)
    jobs = producer(sqs_client, default=url)
    record = labels(queue="default", job_type="record")
    fail = labels(queue="default", job_type="fail")

    for message_id in [
        jobs.enqueue("default", "record", {"n": 1}),
        jobs.enqueue("default", "record", {"n": 2}),
        jobs.enqueue("default", "fail", {}),
    ]:
        worker.wait_for("job_finished", message_id=message_id)
    # The counters are updated just after job_finished is logged (and the slot
    # was freed before that, when the handler returned): wait for them.
    success = ("sqs_jobs_jobs_total", record | {("outcome", "success")})
    retry = ("sqs_jobs_jobs_total", fail | {("outcome", "retry")})
    counted = wait_until_counted(port, {success: 2, retry: 1})

    assert counted[success] == 2
    assert counted[retry] == 1
    assert ("sqs_jobs_jobs_total", record | {("outcome", "retry")}) not in counted
    assert counted[("sqs_jobs_job_duration_seconds_count", record)] == 2
    assert counted[("sqs_jobs_job_duration_seconds_count", fail)] == 1
    assert not [key for key in counted if key[0] == "sqs_jobs_receive_errors_total"]

    # A job that outlasts the max age: no receive completes, yet it is healthy.
    release = tmp_path / "release"
    blocked = jobs.enqueue("default", "block", {"release": str(release)})
    worker.wait_for("block_started", message_id=blocked)
    seen = healthz_while(
        port, lambda: status(port)["last_receive_age_seconds"] > MAX_AGE + 1, 15
    )
    busy = metrics(port)
    release.touch()
    worker.wait_for("job_finished", message_id=blocked, outcome="success")
    wait_until_idle(port)
    stop(worker)

    assert seen == {200}
    assert busy[("sqs_jobs_busy_slots", labels())] == 1
    assert busy[("sqs_jobs_last_receive_age_seconds", labels())] > MAX_AGE
