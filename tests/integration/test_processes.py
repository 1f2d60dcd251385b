"""``flask sqs-worker --processes 2``: a supervisor and its worker processes."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import http.client
import json
import os
import pathlib
import signal
import time
import typing as t

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import message_count
from tests.support import queue_counts

from .conftest import MakeQueue
from .conftest import ROOT
from .conftest import unique_name
from .helpers import producer
from .helpers import read_records
from .helpers import wait_until
from .processes import WorkerProcess
from .servers import free_port
from .servers import refusing_endpoint
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env

if t.TYPE_CHECKING:
    from flask_sqs_jobs.engine import QueueGroup
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def queue_url(make_queue: MakeQueue) -> str:
    return make_queue("processes", visibility_timeout=30)


@pytest.fixture
def jobs(sqs_client: SQSClient, queue_url: str) -> QueueGroup:
    return producer(sqs_client, default=queue_url)


def app_env(
    endpoint: str, queue_name: str, record_file: pathlib.Path
) -> dict[str, str]:
    return {
        "TEST_APP_ENDPOINT": endpoint,
        "TEST_APP_QUEUES": json.dumps({"default": {"name": queue_name}}),
        "TEST_APP_RECORD_FILE": str(record_file),
    }


class StartSupervisor(t.Protocol):
    def __call__(
        self,
        *args: str,
        env: cabc.Mapping[str, str] | None = None,
        wait: bool = True,
        new_session: bool = False,
    ) -> WorkerProcess: ...


@pytest.fixture
def start_supervisor(
    sqs_endpoint: str, queue_url: str, record_file: pathlib.Path
) -> cabc.Iterator[StartSupervisor]:
    """Start ``flask sqs-worker --processes 2 ARGS``; by default wait until both
    worker processes poll. Each supervisor is killed (if it still runs) and
    reaped afterwards; its worker processes then stop by themselves."""
    started: list[WorkerProcess] = []
    default_env = app_env(sqs_endpoint, queue_url.rsplit("/", 1)[-1], record_file)

    def start(
        *args: str,
        env: cabc.Mapping[str, str] | None = None,
        wait: bool = True,
        new_session: bool = False,
    ) -> WorkerProcess:
        command = flask_command("sqs-worker", "--processes", "2", *args)
        process = WorkerProcess(
            command,
            env=subprocess_env(env or default_env),
            cwd=ROOT,
            new_session=new_session,
        )
        started.append(process)
        if wait:
            process.wait_for("worker_started", timeout=30, count=2)
        return process

    yield start
    for process in started:
        process.close()


def child_pids(supervisor: WorkerProcess) -> dict[int, int]:
    """The running worker processes' pids by index, from the supervisor's log."""
    return {
        event["process"]: event["pid"]
        for event in supervisor.find("worker_process_started")
    }


def gone(pid: int) -> bool:
    """Whether the process ``pid`` (not a child of ours) has exited."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # An exited orphan may show as a zombie until init reaps it.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    return False


def job_pids(record_file: pathlib.Path) -> list[int]:
    """The pid of each recorded job, in the order they finished."""
    return [r["pid"] for r in read_records(record_file) if r["kind"] == "job"]


def wait_for_jobs(record_file: pathlib.Path, count: int) -> list[int]:
    """Poll until ``count`` jobs were recorded; return their pids."""
    wait_until(
        lambda: len(job_pids(record_file)) >= count,
        15,
        lambda: f"{count} recorded jobs; got {read_records(record_file)}",
    )
    return job_pids(record_file)


def test_both_processes_run_jobs_and_sigterm_lets_each_finish_its_job(
    start_supervisor: StartSupervisor,
    jobs: QueueGroup,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
    sqs_client: SQSClient,
    queue_url: str,
) -> None:
    supervisor = start_supervisor()
    pids = child_pids(supervisor)
    assert sorted(pids) == [0, 1]
    assert supervisor.pid not in pids.values()
    release = tmp_path / "release"
    for n in range(2):
        jobs.enqueue("default", "block", {"release": str(release), "n": n})
    # One job per process (each runs one at a time), so both are busy.
    supervisor.wait_for("block_started", count=2)

    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait_for("worker_stopping", count=2)
    assert supervisor.returncode is None, "the supervisor did not wait for the jobs"
    release.touch()

    assert supervisor.wait() == 0
    assert sorted(job_pids(record_file)) == sorted(pids.values())
    assert len(supervisor.find("job_finished", outcome="success")) == 2
    assert len(supervisor.find("worker_stopped", reason="stop_requested")) == 2
    assert supervisor.find("supervisor_stopped", exit_status=0)
    assert message_count(sqs_client, queue_url) == 0


def test_ctrl_c_is_one_graceful_stop_for_each_process(
    start_supervisor: StartSupervisor,
    jobs: QueueGroup,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    supervisor = start_supervisor(new_session=True)
    release = tmp_path / "release"
    for n in range(2):
        jobs.enqueue("default", "block", {"release": str(release), "n": n})
    supervisor.wait_for("block_started", count=2)

    # What a terminal does on Ctrl-C: SIGINT to its whole foreground group.
    os.killpg(supervisor.pid, signal.SIGINT)
    supervisor.wait_for("worker_stopping", count=2)
    release.touch()

    assert supervisor.wait() == 0
    stops = supervisor.find("stop_signal_received")
    assert [(e["signal"], e["action"]) for e in stops] == [("SIGINT", "graceful")] * 3
    assert len(job_pids(record_file)) == 2


def test_a_second_signal_stops_everything_at_once(
    start_supervisor: StartSupervisor,
    jobs: QueueGroup,
    sqs_client: SQSClient,
    queue_url: str,
    tmp_path: pathlib.Path,
) -> None:
    supervisor = start_supervisor()
    pids = child_pids(supervisor).values()
    for _n in range(2):
        jobs.enqueue("default", "block", {"release": str(tmp_path / "never")})
    supervisor.wait_for("block_started", count=2)

    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait_for("worker_stopping", count=2)
    supervisor.send_signal(signal.SIGTERM)

    assert supervisor.wait() == 128 + signal.SIGTERM
    wait_until(lambda: all(gone(pid) for pid in pids), 15, supervisor.output)
    # Both running jobs were handed back at once: visible again, long before
    # their 30 s visibility timeout.
    wait_until(
        lambda: queue_counts(sqs_client, queue_url)[0] == 2, 10, supervisor.output
    )


def test_a_killed_process_is_restarted_and_jobs_keep_flowing(
    start_supervisor: StartSupervisor,
    jobs: QueueGroup,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    supervisor = start_supervisor()
    killed = child_pids(supervisor)[1]

    os.kill(killed, signal.SIGKILL)

    restarted = supervisor.wait_for("worker_process_restarted")
    assert restarted["process"] == 1
    assert restarted["pid"] == killed
    assert (restarted["signal"], restarted["backoff_seconds"]) == ("SIGKILL", 1.0)
    supervisor.wait_for("worker_started", count=3, timeout=30)
    pids = child_pids(supervisor)
    assert pids[1] != killed
    for n in range(4):
        jobs.enqueue("default", "record", {"n": n})
    wait_for_jobs(record_file, 4)
    # Both processes, the new one too, take a blocking job each.
    for _n in range(2):
        jobs.enqueue("default", "block", {"release": str(tmp_path / "later")})
    supervisor.wait_for("block_started", count=2)
    (tmp_path / "later").touch()
    assert set(wait_for_jobs(record_file, 6)[4:]) == set(pids.values())

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0


def test_a_process_giving_up_on_receives_stops_the_supervisor_with_1(
    start_supervisor: StartSupervisor, record_file: pathlib.Path
) -> None:
    with refusing_endpoint() as dead:
        env = {
            **app_env(dead, unique_name("unreachable"), record_file),
            "TEST_APP_MAX_RECEIVE_BACKOFF": "0.1",
        }
        supervisor = start_supervisor(env=env, wait=False)
        status = supervisor.wait(timeout=90)

    assert status == 1, supervisor.output()
    assert supervisor.find("worker_process_exited", exit_status=1)
    assert supervisor.find("supervisor_stopped", exit_status=1)
    assert not supervisor.find("worker_process_restarted")


def test_a_configuration_error_in_the_processes_exits_2(
    start_supervisor: StartSupervisor, sqs_endpoint: str, record_file: pathlib.Path
) -> None:
    env = app_env(sqs_endpoint, unique_name("missing"), record_file)
    supervisor = start_supervisor(env=env, wait=False)

    assert supervisor.wait(timeout=30) == 2
    assert "Error: queue 'default': SQS has no queue named" in supervisor.output()
    assert supervisor.find("supervisor_stopped", exit_status=2)
    assert not supervisor.find("worker_process_restarted")


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_one_health_port_covers_every_process(
    start_supervisor: StartSupervisor,
    jobs: QueueGroup,
    record_file: pathlib.Path,
) -> None:
    port = free_port()
    supervisor = start_supervisor("--health-port", str(port), "--health-max-age", "3")
    pids = child_pids(supervisor)
    wait_until(lambda: get(port, "/healthz") == (200, "ok"), 15, supervisor.output)
    code, body = get(port, "/status")
    report = json.loads(body)
    assert (code, report["healthy"]) == (200, True)
    assert [(p["process"], p["pid"]) for p in report["processes"]] == sorted(
        pids.items()
    )
    assert all(p["busy_slots"] == 0 and p["queues"] for p in report["processes"])

    for n in range(4):
        jobs.enqueue("default", "record", {"n": n})
    wait_for_jobs(record_file, 4)
    ran = {str(index) for index, pid in pids.items() if pid in job_pids(record_file)}

    def scrape() -> list[t.Any]:
        code, text = get(port, "/metrics")
        assert code == 200
        return [
            sample
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    def successes(samples: list[t.Any]) -> float:
        return sum(
            float(s.value)
            for s in samples
            if s.name == "sqs_jobs_jobs_total" and s.labels["outcome"] == "success"
        )

    # A job's handler writes its record before the job is settled and counted.
    wait_until(lambda: successes(scrape()) >= 4, 15, supervisor.output)
    samples = scrape()
    busy = {s.labels["process"] for s in samples if s.name == "sqs_jobs_busy_slots"}
    assert busy == {"0", "1"}
    finished = {
        s.labels["process"]: s.value
        for s in samples
        if s.name == "sqs_jobs_jobs_total" and s.labels["outcome"] == "success"
    }
    assert set(finished) == ran
    assert sum(finished.values()) == 4

    os.kill(pids[1], signal.SIGSTOP)
    try:
        wait_until(lambda: get(port, "/healthz")[0] == 503, 15, supervisor.output, 0.2)
        started = time.monotonic()
        code, reason = get(port, "/healthz")
        assert time.monotonic() - started < 0.5, "/healthz waited for the process"
        assert code == 503
        assert reason.startswith(f"process 1 (pid {pids[1]})")
        assert get(port, "/metrics")[0] == 200
    finally:
        os.kill(pids[1], signal.SIGCONT)
    wait_until(lambda: get(port, "/healthz") == (200, "ok"), 15, supervisor.output)

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0


def test_the_worker_processes_stop_when_the_supervisor_is_killed(
    start_supervisor: StartSupervisor,
) -> None:
    supervisor = start_supervisor()
    pids = child_pids(supervisor).values()

    supervisor.send_signal(signal.SIGKILL)
    assert supervisor.wait() == -signal.SIGKILL
    wait_until(lambda: all(gone(pid) for pid in pids), 30, supervisor.output)
