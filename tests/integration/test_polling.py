"""Long polling across queues and weighted polling order, against a real server."""

from __future__ import annotations

import collections
import json
import pathlib
import signal
import sys
import time
import typing as t

from tests.support import message_count

from .conftest import MakeQueue
from .conftest import StartWorker
from .helpers import wait_for_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


def _send_jobs(
    client: SQSClient, url: str, job_type: str, payloads: list[dict[str, t.Any]]
) -> None:
    """Send jobs in the wire format, ten a request, as any producer could."""
    for start in range(0, len(payloads), 10):
        chunk = payloads[start : start + 10]
        response = client.send_message_batch(
            QueueUrl=url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": json.dumps({"job_type": job_type, "payload": p}),
                }
                for i, p in enumerate(chunk)
            ],
        )
        assert not response.get("Failed"), response["Failed"]


def test_idle_worker_picks_up_a_job_on_any_queue_at_once_without_spinning(
    sqs_client: SQSClient, make_queue: MakeQueue, start_worker: StartWorker
) -> None:
    """While long-polling for 20 s, a job sent to any of three weighted queues
    starts well before the long poll would end, and the idle worker stays
    quiet."""
    urls = {name: make_queue(name) for name in ("high", "mid", "low")}
    weights = {"high": 5, "mid": 2, "low": 1}
    worker = start_worker(
        {name: {"url": url, "weight": weights[name]} for name, url in urls.items()},
        idle_wait=20,
    )
    # Every queue was found empty once: the worker now long-polls them all.
    worker.wait_for("receive_empty", count=3, wait_seconds=0)

    # Mostly to the light queues: a worker that long-polled only the queue that
    # comes first in its order would pass this about once in 10,000 runs.
    sent: collections.Counter[str] = collections.Counter()
    for name in ("low", "mid", "high", "low", "mid", "low"):
        sent[name] += 1
        sqs_client.send_message(
            QueueUrl=urls[name],
            MessageBody=json.dumps({"job_type": "record", "payload": {"to": name}}),
        )
        # A generous bound, far below the 20 s a sequential long poll could take.
        worker.wait_for(
            "job_finished", timeout=5, count=sent[name], queue=name, outcome="success"
        )

    # Idle again: over a few seconds the worker neither calls ReceiveMessage in
    # a loop nor burns CPU.
    worker.wait_for("job_finished", count=6)
    measure_cpu = sys.platform.startswith("linux")
    receives_before = len(worker.find("receive_empty"))
    cpu_before = worker.cpu_seconds() if measure_cpu else 0.0
    time.sleep(3)
    assert len(worker.find("receive_empty")) - receives_before <= 3
    if measure_cpu:
        assert worker.cpu_seconds() - cpu_before < 0.5
    assert worker.returncode is None
    assert all(message_count(sqs_client, url) == 0 for url in urls.values())


def test_weighted_polling_serves_the_heavy_queue_first_more_often_without_starving(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    start_worker: StartWorker,
    record_file: pathlib.Path,
) -> None:
    """With both queues full, weight 5 against 1 takes about five heavy jobs for
    each light one, and the light queue keeps moving."""
    heavy, light = make_queue("heavy"), make_queue("light")
    cycles = 150
    # Neither queue can run dry within the counted cycles: the light one would
    # fail the upper bound below first.
    _send_jobs(sqs_client, heavy, "record", [{"n": i} for i in range(cycles)])
    _send_jobs(sqs_client, light, "record", [{"n": i} for i in range(60)])

    worker = start_worker(
        {"heavy": {"url": heavy, "weight": 5}, "light": {"url": light, "weight": 1}}
    )
    records = wait_for_records(record_file, cycles, timeout=60)[:cycles]

    # One job per polling cycle (concurrency 1). The light queue comes first
    # with probability 1/6: expected 25 of 150, standard deviation 4.6. A correct
    # worker fails these bounds about once in 10 ** 8 runs; one that ignores the
    # weights (expected 75) passes them about once in 1,500.
    light_jobs = sum(r["queue"] == "light" for r in records)
    assert light_jobs >= 4, f"the light queue was starved: {light_jobs} of {cycles}"
    assert light_jobs <= 55, f"weights ignored: {light_jobs} light of {cycles}"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
