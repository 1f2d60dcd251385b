"""Limits that hold across real ``flask sqs-worker`` processes sharing a store."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import json
import os
import pathlib
import signal
import sys
import threading
import time
import typing as t

import boto3
import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.sql._limits import permits

from tests.integration import limits_app
from tests.store.conftest import dynamodb_endpoint as dynamodb_endpoint

from .conftest import FAKE_AWS_ENV
from .conftest import make_client
from .conftest import MakeQueue
from .conftest import REGION
from .conftest import ROOT
from .conftest import unique_name
from .helpers import producer
from .helpers import wait_until
from .processes import WorkerProcess
from .test_concurrency import _most_at_once

APP = "tests.integration.limits_app:create_app"
#: (time, job type, tenant, pid) of each start or end.
Note: t.TypeAlias = tuple[float, str, str, int]


def read_notes(path: pathlib.Path) -> list[Note]:
    if not path.exists():
        return []
    notes = []
    for line in path.read_text().split("\n")[:-1]:
        at, job_type, tenant, pid = line.split()
        notes.append((float(at), job_type, tenant, int(pid)))
    return notes


@dataclasses.dataclass
class LimitStore:
    """The store the workers share: its settings for the app, and a way to open it."""

    kind: str
    env: dict[str, str]
    open: cabc.Callable[[], t.Any]
    #: The SQL store's URL ("" on DynamoDB).
    url: str = ""


@pytest.fixture(params=["sqlite", "postgresql", "dynamodb"])
def limit_store(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> LimitStore:
    """A fresh store with its tables: a SQLite file, PostgreSQL or DynamoDB."""
    if request.param == "dynamodb":
        # moto's threaded server can let two racing conditional writes both
        # succeed; this one serves one request at a time, as DynamoDB orders them.
        endpoint = request.getfixturevalue("dynamodb_endpoint")
        client = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
        table = unique_name("limits")
        DynamoDBStore(table, boto_client=client).create_tables()
        return LimitStore(
            "dynamodb",
            {"TEST_APP_DYNAMODB_TABLE": table, "AWS_ENDPOINT_URL_DYNAMODB": endpoint},
            lambda: DynamoDBStore(table, boto_client=client),
        )
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    store = SQLAlchemyStore(url)
    store.create_tables()
    store.close()
    return LimitStore(
        request.param, {"TEST_APP_STORE_URL": url}, lambda: SQLAlchemyStore(url), url
    )


class Workers:
    """``flask sqs-worker`` processes of the limits app, on one queue and store."""

    def __init__(
        self, endpoint: str, url: str, store: LimitStore, shared: pathlib.Path
    ) -> None:
        self.shared, self.url = shared, url
        self.group = producer(make_client(endpoint), default=url)
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AWS_", "FLASK_"))
            },
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "TEST_APP_ENDPOINT": endpoint,
            "TEST_APP_QUEUES": json.dumps(
                {"default": {"name": url.rsplit("/", 1)[-1]}}
            ),
            **store.env,
            "TEST_APP_DIR": str(shared),
        }
        self.processes: list[WorkerProcess] = []

    def start(self, count: int, concurrency: int) -> list[WorkerProcess]:
        command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]
        started = [
            WorkerProcess(
                [*command, "--concurrency", str(concurrency)], env=self.env, cwd=ROOT
            )
            for _ in range(count)
        ]
        self.processes.extend(started)
        for worker in started:
            worker.wait_for("worker_started", timeout=60)
        return started

    def output(self) -> str:
        return "\n---\n".join(w.output()[-4000:] for w in self.processes)

    def close(self) -> None:
        for worker in self.processes:
            worker.close()


@pytest.fixture
def workers(
    sqs_endpoint: str,
    make_queue: MakeQueue,
    limit_store: LimitStore,
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> cabc.Iterator[Workers]:
    visibility = getattr(request, "param", 30)
    url = make_queue("limits", visibility_timeout=visibility)
    started = Workers(sqs_endpoint, url, limit_store, tmp_path)
    yield started
    started.close()


# The serial DynamoDB server cannot answer three workers' refused takes at
# this rate in time; the DynamoDB bucket's arithmetic is the SQL one's
# (tests/store/test_limits_contract.py runs it on both).
@pytest.mark.parametrize("limit_store", ["sqlite", "postgresql"], indirect=True)
def test_three_workers_share_one_rate_limit(
    workers: Workers, limit_store: LimitStore
) -> None:
    rate = limits_app.RATE
    group = workers.group
    # A backlog first, then more work than the limit allows (1.1 x) for 12 s:
    # work waits the whole time.
    produced: list[tuple[float, int]] = []
    jobs = [("ping", {"n": n}) for n in range(60)]
    stop = threading.Event()
    starts_file = workers.shared / "starts"

    def drain() -> None:
        # Until the first job starts, the bucket is kept empty: the workers
        # start what refills, not a burst saved up while they started.
        store = limit_store.open()
        limits = store.limits()
        while not starts_file.exists() and not stop.is_set():
            wait = limits.take_token("ping", "", rate, 1)
            if wait:
                stop.wait(min(wait, 0.01))
        store.close()

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()

    def produce() -> None:
        sent, started = len(jobs), time.monotonic()
        while not stop.is_set() and time.monotonic() - started < 12:
            due = int((time.monotonic() - started) * rate * 1.1) + len(jobs)
            while sent < due:
                batch = [("ping", {"n": n}) for n in range(sent, sent + 10)]
                produced.append((time.time(), sent + 10))
                group.enqueue_many("default", batch)
                sent += 10
            stop.wait(0.05)

    for chunk in range(0, len(jobs), 10):
        group.enqueue_many("default", jobs[chunk : chunk + 10])
    produced.append((time.time(), len(jobs)))
    thread = threading.Thread(target=produce, daemon=True)
    workers.start(3, concurrency=8)
    thread.start()
    thread.join(40)
    stop.set()
    drainer.join(10)
    assert not thread.is_alive()

    # Nothing refused is lost: every job produced starts (at least once), even
    # though most were refused by the limit first. How close to the limit the
    # workers run depends on the machine's speed, so it is not asserted here.
    total = produced[-1][1]
    deadline = time.monotonic() + 60
    while len(read_notes(starts_file)) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    starts = sorted(at for at, kind, _, _ in read_notes(starts_file))
    assert len(starts) >= total, workers.output()
    # The limit's bound: any window of `per` seconds holds at most 2 * limit.
    busiest = max(
        sum(1 for other in starts[i:] if other < at + 1.0)
        for i, at in enumerate(starts)
    )
    assert busiest <= 2 * rate


def intervals(notes: list[Note]) -> dict[str, list[tuple[float, float]]]:
    """Each tenant's runs, as (start, end), pairing each process's notes in order."""
    runs: dict[str, list[tuple[float, float]]] = {}
    open_: dict[tuple[str, int], list[float]] = {}
    for at, kind, tenant, pid in sorted(notes):
        if kind == "start":
            open_.setdefault((tenant, pid), []).append(at)
        else:
            began = open_[(tenant, pid)].pop(0)
            runs.setdefault(tenant, []).append((began, at))
    return runs


def most_at_once(runs: list[tuple[float, float]]) -> int:
    return _most_at_once([{"started": a, "finished": b} for a, b in runs])


def test_a_concurrency_limit_per_tenant_holds_across_three_workers(
    workers: Workers,
) -> None:
    workers.start(3, concurrency=16)
    group = workers.group
    tenants = ["acme", "globex", "initech", "umbrella"]
    jobs = [("report", {"tenant": x, "n": n}) for n in range(10) for x in tenants]
    for chunk in range(0, len(jobs), 10):
        group.enqueue_many("default", jobs[chunk : chunk + 10])

    def ended(tenant: str) -> int:
        return sum(
            1 for note in read_notes(workers.shared / "ends") if note[2] == tenant
        )

    # Delivery is at least once: a job may run again (a redelivery under load).
    wait_until(lambda: all(ended(x) >= 10 for x in tenants), 120, workers.output)

    notes = [
        (at, "start", tenant, pid)
        for at, _, tenant, pid in read_notes(workers.shared / "starts")
    ] + [
        (at, "end", tenant, pid)
        for at, _, tenant, pid in read_notes(workers.shared / "ends")
    ]
    runs = intervals(notes)
    assert sorted(runs) == tenants
    assert all(len(runs[x]) >= 10 for x in tenants)
    peaks = {tenant: most_at_once(runs[tenant]) for tenant in tenants}
    assert max(peaks.values()) <= limits_app.PER_TENANT, peaks
    # The limit was reached, not merely never approached.
    assert max(peaks.values()) >= 2, peaks


@pytest.mark.parametrize("limit_store", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("workers", [6], indirect=True)
def test_a_killed_workers_permit_comes_back_within_one_lease(
    workers: Workers, limit_store: LimitStore
) -> None:
    first, second = workers.start(2, concurrency=2)
    group = workers.group
    group.enqueue("default", "hold", {"n": 1})

    def holder() -> int | None:
        for _, kind, n, pid in read_notes(workers.shared / "starts"):
            if kind == "hold" and n == "1":
                return pid
        return None

    wait_until(lambda: holder() is not None, 30, workers.output)
    victim = first if first.pid == holder() else second
    survivor = second if victim is first else first
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = time.time()
    # The killed job's message comes back after its visibility timeout: let
    # that delivery end at once, whoever takes the permit first.
    (workers.shared / "release-1").touch()

    store = SQLAlchemyStore(limit_store.url)
    with store.engine.connect() as connection:
        [(expires_at,)] = connection.execute(
            sa.select(permits.c.expires_at).where(permits.c.name == "solo")
        ).all()
    store.close()
    # The dead holder's permit ends within one lease of its death.
    assert expires_at <= killed_at + limits_app.SOLO_LEASE

    group.enqueue("default", "hold", {"n": 2})

    def second_started() -> bool:
        return any(
            kind == "hold" and n == "2" and pid == survivor.pid
            for _, kind, n, pid in read_notes(workers.shared / "starts")
        )

    wait_until(second_started, 60, workers.output)
    (workers.shared / "release-2").touch()
