"""``flask sqs-worker --max-jobs``: a worker process retires itself, and under
``--processes`` its supervisor replaces it."""

from __future__ import annotations

import collections
import collections.abc as cabc
import pathlib
import signal
import typing as t

import pytest

from tests.support import message_count

from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import producer
from .helpers import read_records
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env
from .test_processes import app_env
from .test_processes import job_pids

if t.TYPE_CHECKING:
    from flask_sqs_jobs.engine import QueueGroup
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def queue_url(make_queue: MakeQueue) -> str:
    return make_queue("recycling", visibility_timeout=30)


@pytest.fixture
def jobs(sqs_client: SQSClient, queue_url: str) -> QueueGroup:
    return producer(sqs_client, default=queue_url)


@pytest.fixture
def start_worker(
    sqs_endpoint: str, queue_url: str, record_file: pathlib.Path
) -> cabc.Iterator[t.Callable[..., WorkerProcess]]:
    """Start ``flask sqs-worker ARGS``; each is killed (if still running) afterwards."""
    started: list[WorkerProcess] = []
    env = subprocess_env(
        app_env(sqs_endpoint, queue_url.rsplit("/", 1)[-1], record_file)
    )

    def start(*args: str) -> WorkerProcess:
        process = WorkerProcess(flask_command("sqs-worker", *args), env=env, cwd=ROOT)
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()


def test_a_single_worker_runs_max_jobs_jobs_then_exits_0(
    start_worker: t.Callable[..., WorkerProcess],
    jobs: QueueGroup,
    record_file: pathlib.Path,
    sqs_client: SQSClient,
    queue_url: str,
) -> None:
    for n in range(5):
        jobs.enqueue("default", "record", {"n": n})

    worker = start_worker("--max-jobs", "3", "--idle-wait", "1")

    assert worker.wait(timeout=30) == 0, worker.output()
    assert len(job_pids(record_file)) == 3
    assert worker.find("worker_recycled", reason="max_jobs", jobs=3)
    assert worker.find("worker_stopped", exit_status=0)
    # The two jobs it did not take are still there for the next process.
    assert message_count(sqs_client, queue_url) == 2


def test_under_processes_recycled_workers_are_replaced_and_the_backlog_runs(
    start_worker: t.Callable[..., WorkerProcess],
    jobs: QueueGroup,
    record_file: pathlib.Path,
    sqs_client: SQSClient,
    queue_url: str,
) -> None:
    for n in range(8):
        jobs.enqueue("default", "record", {"n": n})

    supervisor = start_worker("--processes", "2", "--max-jobs", "2", "--idle-wait", "1")

    wait_until(
        lambda: len(job_pids(record_file)) >= 8,
        60,
        lambda: f"8 recorded jobs; got {read_records(record_file)}",
    )
    per_process = collections.Counter(job_pids(record_file))
    assert len(job_pids(record_file)) == 8
    assert max(per_process.values()) <= 2, per_process
    assert len(supervisor.find("worker_process_recycled")) >= 2
    assert not supervisor.find("worker_process_restarted")
    assert supervisor.returncode is None, "a recycled process stopped the others"
    wait_until(lambda: message_count(sqs_client, queue_url) == 0, 15, supervisor.output)

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0, supervisor.output()
    assert supervisor.find("supervisor_stopped", exit_status=0)
