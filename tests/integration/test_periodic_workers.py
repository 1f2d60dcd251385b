"""Periodic jobs with real ``flask sqs-worker`` processes: one job per tick.

Each test shifts the workers' scheduler clock (``TEST_APP_CLOCK_OFFSET``) so
that the next minute boundary of ``* * * * *`` comes a few seconds after the
workers start, instead of waiting up to a minute for it.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import math
import os
import pathlib
import signal
import sys
import time
import typing as t

import boto3
import pytest

from .conftest import FAKE_AWS_ENV
from .conftest import MakeQueue
from .conftest import REGION
from .conftest import ROOT
from .conftest import unique_name
from .processes import WorkerProcess

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

APP = "tests.integration.periodic_app:create_app"
#: How long after the workers start the tick comes: time for them to be up.
#: A loaded machine may need longer, so a test that misses the tick starts
#: its workers again with the next lead.
LEADS_SECONDS = (20.0, 45.0, 90.0)


class Tick(t.NamedTuple):
    offset: float
    tick: dt.datetime

    @property
    def text(self) -> str:
        return self.tick.strftime("%Y-%m-%dT%H:%M:%SZ")


def next_shifted_tick(lead: float) -> Tick:
    """A clock offset that puts a minute boundary ``lead`` seconds from now."""
    target = time.time() + lead
    boundary = math.ceil(target / 60) * 60
    return Tick(boundary - target, dt.datetime.fromtimestamp(boundary, dt.UTC))


class StartWorkers(t.Protocol):
    def __call__(self, count: int = 1, **env: str) -> list[WorkerProcess]: ...


@pytest.fixture
def start_workers(
    sqs_endpoint: str, record_file: pathlib.Path
) -> cabc.Iterator[StartWorkers]:
    """Start ``flask sqs-worker`` processes of the periodic app, all at once."""
    started: list[WorkerProcess] = []

    def start(count: int = 1, **app_env: str) -> list[WorkerProcess]:
        env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AWS_", "FLASK_"))
            },
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "AWS_ENDPOINT_URL_DYNAMODB": sqs_endpoint,
            "TEST_APP_ENDPOINT": sqs_endpoint,
            "TEST_APP_RECORD_FILE": str(record_file),
            **app_env,
        }
        command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]
        processes = [WorkerProcess(command, env=env, cwd=ROOT) for _ in range(count)]
        started.extend(processes)
        for process in processes:
            process.wait_for("worker_started", timeout=30)
        return processes

    yield start
    for process in started:
        process.close()


def queues_env(url: str, shifted: Tick) -> dict[str, str]:
    name = url.rsplit("/", 1)[-1]
    return {
        "TEST_APP_QUEUES": json.dumps({"default": {"name": name}}),
        "TEST_APP_CLOCK_OFFSET": repr(shifted.offset),
    }


class Arranged(t.NamedTuple):
    workers: list[WorkerProcess]
    shifted: Tick
    env: dict[str, str]
    #: How long to wait for the tick to be handled, from now.
    timeout: float


def start_before_tick(
    start_workers: StartWorkers,
    count: int,
    env_for: cabc.Callable[[Tick], dict[str, str]],
    **extra: str,
) -> Arranged:
    """Start ``count`` workers that are all waiting for the same next tick.

    A worker that came up after the tick waits for the following one; then
    the workers are stopped and started again with a longer lead.
    """
    for lead in LEADS_SECONDS:
        shifted = next_shifted_tick(lead)
        env = env_for(shifted)
        workers = start_workers(count, **extra, **env)
        started = [w.wait_for("scheduler_started") for w in workers]
        if all(s["schedules"] == {"every_minute": shifted.text} for s in started):
            return Arranged(workers, shifted, env, lead + 30)
        for worker in workers:
            worker.close()
    raise AssertionError(f"workers took over {LEADS_SECONDS[-1]} s to start")


def jobs_run(record_file: pathlib.Path) -> list[dict[str, t.Any]]:
    if not record_file.exists():
        return []
    lines = record_file.read_text().splitlines()
    return [json.loads(line) for line in lines if json.loads(line)["kind"] == "job"]


def wait_until_drained(sqs: SQSClient, url: str, timeout: float = 30) -> None:
    """Until no message is visible or in flight: every job sent has been run."""
    deadline = time.monotonic() + timeout
    names: t.Any = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    while time.monotonic() < deadline:
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)
        if all(counts["Attributes"][name] == "0" for name in names):
            return
        time.sleep(0.2)
    raise AssertionError(f"queue not drained after {timeout} s: {counts}")


def handled_the_tick(worker: WorkerProcess, shifted: Tick) -> bool:
    return bool(
        worker.find("schedule_fired", tick=shifted.text)
        or worker.find("schedule_tick_taken", tick=shifted.text)
    )


def sql_store(tmp_path: pathlib.Path) -> str:
    """A SQLite store with its tables; skips while the outbox is missing."""
    pytest.importorskip(
        "flask_sqs_jobs.store.outbox._write", reason="outbox not available yet"
    )
    from flask_sqs_jobs.store import SQLAlchemyStore

    store_url = f"sqlite:///{tmp_path / 'jobs.db'}"
    SQLAlchemyStore(store_url).create_tables()
    return store_url


@pytest.fixture
def dynamodb_table(sqs_endpoint: str) -> cabc.Iterator[str]:
    from flask_sqs_jobs.store import DynamoDBStore

    client = boto3.client("dynamodb", region_name=REGION, endpoint_url=sqs_endpoint)
    store = DynamoDBStore(unique_name("ticks"), boto_client=client)
    store.create_tables()
    yield store.table_name
    client.delete_table(TableName=store.table_name)


@pytest.mark.parametrize("setup", ["sql", "dynamodb", "fifo without a store"])
def test_three_workers_run_exactly_one_job_per_tick(
    setup: str,
    request: pytest.FixtureRequest,
    start_workers: StartWorkers,
    make_queue: MakeQueue,
    sqs_client: SQSClient,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    hold = tmp_path / "release"
    if setup == "sql":
        url = make_queue("periodic")
        setup_env = {"TEST_APP_STORE_URL": sql_store(tmp_path)}
    elif setup == "dynamodb":
        url = make_queue("periodic")
        setup_env = {
            "TEST_APP_DYNAMODB_TABLE": request.getfixturevalue("dynamodb_table")
        }
    else:
        url = make_queue("periodic", fifo=True)
        # SQS keeps a FIFO deduplication id for five minutes; local servers
        # (moto) forget it once the message is deleted. The job holds its
        # message until every worker has sent, as a busy queue would.
        setup_env = {"TEST_APP_HOLD_FILE": str(hold)}
    workers, shifted, _, timeout = start_before_tick(
        start_workers, 3, lambda tick: {**queues_env(url, tick), **setup_env}
    )

    deadline = time.monotonic() + timeout
    while not all(handled_the_tick(w, shifted) for w in workers):
        assert time.monotonic() < deadline, [w.output() for w in workers]
        time.sleep(0.2)
    if setup == "fifo without a store":
        hold.touch()
    wait_until_drained(sqs_client, url)

    [job] = jobs_run(record_file)
    assert job["job_id"] == f"every_minute:{shifted.text}"
    assert job["scheduled_for"] == shifted.tick.isoformat()
    fired = [e for w in workers for e in w.find("schedule_fired", tick=shifted.text)]
    assert {e["job_id"] for e in fired} == {job["job_id"]}
    if setup != "fifo without a store":
        assert len(fired) == 1  # the claim: one worker enqueued it


def test_a_tick_claimed_by_a_worker_killed_before_sending_still_runs_once(
    start_workers: StartWorkers,
    make_queue: MakeQueue,
    sqs_client: SQSClient,
    record_file: pathlib.Path,
    dynamodb_table: str,
) -> None:
    url = make_queue("periodic")
    [claimer], shifted, env, timeout = start_before_tick(
        start_workers,
        1,
        lambda tick: {
            **queues_env(url, tick),
            "TEST_APP_DYNAMODB_TABLE": dynamodb_table,
            "TEST_APP_STALE_AFTER": "2",
        },
        TEST_APP_PAUSE_AFTER_CLAIM="1",
    )
    claimer.wait_for("tick_claimed", timeout=timeout)
    claimer.send_signal(signal.SIGKILL)
    assert claimer.wait() == -signal.SIGKILL

    [survivor] = start_workers(1, **env)
    fired = survivor.wait_for("schedule_fired", tick=shifted.text, timeout=30)
    assert fired["recovered"] is True
    wait_until_drained(sqs_client, url)
    [job] = jobs_run(record_file)
    assert job["job_id"] == f"every_minute:{shifted.text}"
    assert job["pid"] == survivor.pid


def test_with_a_sql_store_a_worker_killed_after_the_claim_loses_nothing(
    start_workers: StartWorkers,
    make_queue: MakeQueue,
    sqs_client: SQSClient,
    record_file: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    store_url = sql_store(tmp_path)
    url = make_queue("periodic")
    [claimer], shifted, env, timeout = start_before_tick(
        start_workers,
        1,
        lambda tick: {**queues_env(url, tick), "TEST_APP_STORE_URL": store_url},
        TEST_APP_PAUSE_AFTER_CLAIM="1",
    )
    claimer.wait_for("tick_claimed", timeout=timeout)
    claimer.send_signal(signal.SIGKILL)
    claimer.wait()

    start_workers(1, **env)  # its outbox relay sends what the claimer did not
    deadline = time.monotonic() + 30
    while not jobs_run(record_file):
        assert time.monotonic() < deadline, "the claimed tick never ran"
        time.sleep(0.2)
    wait_until_drained(sqs_client, url)
    [job] = jobs_run(record_file)
    assert job["job_id"] == f"every_minute:{shifted.text}"
