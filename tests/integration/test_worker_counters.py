"""What a real ``flask sqs-worker`` counts of messages that never reach a
handler, and the ``sqs_jobs_healthy`` gauge beside ``/healthz``."""

from __future__ import annotations

import collections.abc as cabc
import json
import pathlib
import signal
import typing as t

import pytest

from tests.faults.proxy import FaultProxy
from tests.support import queue_counts

from .conftest import MakeQueue
from .conftest import ROOT
from .helpers import producer
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env
from .test_operations import get
from .test_operations import labels
from .test_operations import metrics
from .test_operations import status

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Above the test app's 1 s idle wait: an idle worker stays healthy.
MAX_AGE = 3
#: Bodies another producer might send, and the reason each is counted under.
BODIES = [
    ("<xml>not json</xml>", "not_json"),
    ("[" * 50_000, "too_deep"),
    ('["record", {}]', "not_object"),
    ('{"job_type": 42, "payload": {}}', "bad_job_type"),
    ('{"job_type": "record", "payload": "n=1"}', "bad_payload"),
    ('{"job_type": "record", "payload": {}, "job_id": "a b"}', "bad_job_id"),
]
UNKNOWN_JOB_TYPES = ["retired_report", 'evil"} 1\nsqs_jobs_healthy 0\n#', "x" * 300]


class StartWorker(t.Protocol):
    def __call__(
        self, url: str, *, endpoint: str | None = None
    ) -> tuple[WorkerProcess, int]: ...


@pytest.fixture
def start_worker(
    sqs_endpoint: str, record_file: pathlib.Path
) -> cabc.Iterator[StartWorker]:
    """``flask sqs-worker --health-port 0`` on one queue; returns the process
    and its health port once it polls. Always killed and reaped afterwards."""
    started: list[WorkerProcess] = []

    def start(url: str, *, endpoint: str | None = None) -> tuple[WorkerProcess, int]:
        env = {
            "TEST_APP_ENDPOINT": endpoint or sqs_endpoint,
            "TEST_APP_QUEUES": json.dumps({"default": {"name": url.rsplit("/")[-1]}}),
            "TEST_APP_RECORD_FILE": str(record_file),
        }
        args = ["--health-port", "0", "--health-max-age", str(MAX_AGE)]
        process = WorkerProcess(
            flask_command("sqs-worker", *args), env=subprocess_env(env), cwd=ROOT
        )
        started.append(process)
        port = int(process.wait_for("health_server_started", timeout=30)["port"])
        process.wait_for("worker_started", timeout=30)
        return process, port

    yield start
    for process in started:
        process.close()


def stop(worker: WorkerProcess) -> None:
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def family(port: int, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {key: value for (n, key), value in metrics(port).items() if n == name}


def test_malformed_messages_and_unknown_job_types_are_counted_without_their_text(
    sqs_client: SQSClient, make_queue: MakeQueue, start_worker: StartWorker
) -> None:
    url = make_queue("counters", visibility_timeout=30)
    worker, port = start_worker(url)
    for body, _ in BODIES:
        sqs_client.send_message(QueueUrl=url, MessageBody=body)
    jobs = producer(sqs_client, default=url)
    for job_type in UNKNOWN_JOB_TYPES:
        jobs.enqueue("default", job_type, {"secret": "do-not-show"})
    malformed = {labels(queue="default", reason=reason): 1.0 for _, reason in BODIES}
    unknown = {labels(queue="default"): float(len(UNKNOWN_JOB_TYPES))}

    wait_until(
        lambda: (
            family(port, "sqs_jobs_malformed_total") == malformed
            and family(port, "sqs_jobs_unknown_job_type_total") == unknown
            and status(port)["outcomes"]["success"] == 1
        ),
        30,
        lambda: f"the counts; /metrics: {get(port, '/metrics')[1]}",
    )
    text = get(port, "/metrics")[1]
    scraped = metrics(port)
    report = status(port)
    stop(worker)

    for job_type in UNKNOWN_JOB_TYPES:
        assert job_type not in text
    assert "do-not-show" not in text
    assert scraped[("sqs_jobs_healthy", labels())] == 1
    # The malformed messages are deleted; the bad job id's job ran; the
    # unknown types stay hidden for a worker that knows them.
    assert queue_counts(sqs_client, url) == (0, len(UNKNOWN_JOB_TYPES), 0)
    assert report["outcomes"]["success"] == 1
    assert sum(report["outcomes"].values()) == 1


def test_healthy_is_0_while_healthz_fails_and_1_again_once_it_recovers(
    sqs_endpoint: str, make_queue: MakeQueue, start_worker: StartWorker
) -> None:
    url = make_queue("healthy")
    with FaultProxy(sqs_endpoint) as proxy:
        worker, port = start_worker(url, endpoint=proxy.endpoint)

        def healthy() -> float:
            return metrics(port)[("sqs_jobs_healthy", labels())]

        up = healthy()
        proxy.refuse()
        wait_until(
            lambda: get(port, "/healthz")[0] == 503 and healthy() == 0,
            30,
            lambda: f"/healthz 503 and sqs_jobs_healthy 0; {status(port)}",
        )
        down = (get(port, "/healthz")[0], healthy())
        proxy.restore()
        wait_until(
            lambda: get(port, "/healthz")[0] == 200 and healthy() == 1,
            30,
            lambda: f"/healthz 200 and sqs_jobs_healthy 1; {status(port)}",
        )
        stop(worker)

    assert up == 1
    assert down == (503, 0)
