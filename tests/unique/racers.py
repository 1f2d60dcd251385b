"""One process of the unique-key race: threads enqueueing one key at once.

Run in a spawned process by ``test_unique_races.py`` (and in the test's own
process); importable, so ``multiprocessing``'s spawn can find it.
"""

from __future__ import annotations

import threading
import typing as t

import boto3
from moto import mock_aws

REGION = "us-east-1"


def store_for(where: dict[str, str]) -> t.Any:
    """The store the race's keys are taken in: SQL by URL, or a DynamoDB table."""
    from flask_sqs_jobs.store import DynamoDBStore
    from flask_sqs_jobs.store import SQLAlchemyStore

    if "url" in where:
        return SQLAlchemyStore(where["url"])
    client = boto3.client(
        "dynamodb",
        endpoint_url=where["endpoint"],
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return DynamoDBStore(where["table"], boto_client=client)


def race(
    name: str, where: dict[str, str], threads: int, total: int, go: t.Any
) -> list[str]:
    """Enqueue ``total`` jobs of one unique key from ``threads`` threads, on ``go``.

    Each job's id is ``<name>-<thread>-<n>``; returns what each enqueue
    returned (a MessageId when it was sent, else the holder's job id).
    """
    from flask_sqs_jobs.engine import QueueGroup
    from flask_sqs_jobs.engine import use_unique_keys

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        sqs.create_queue(QueueName="race")
        group = QueueGroup.build(boto_client=sqs, queues={"default": {"name": "race"}})
        store = store_for(where)
        use_unique_keys(group, store.unique_keys())
        returned: list[str] = []
        lock = threading.Lock()

        def enqueue_all(thread: int) -> None:
            go.wait(60)
            for n in range(total // threads + (thread < total % threads)):
                value = group.enqueue(
                    "default",
                    "report",
                    {},
                    unique_key="one",
                    job_id=f"{name}-{thread}-{n}",
                )
                with lock:
                    returned.append(value)

        workers = [
            threading.Thread(target=enqueue_all, args=(i,)) for i in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        store.close()
        return returned


def race_in_child(
    name: str,
    where: dict[str, str],
    threads: int,
    total: int,
    ready: t.Any,
    go: t.Any,
    results: t.Any,
) -> None:
    """:func:`race` in a spawned process: say ready, race, put the results."""
    import threading as _threading

    started = _threading.Event()

    class Go:
        def wait(self, timeout: float) -> bool:
            started.wait(timeout)
            return bool(go.wait(timeout))

    ready.put(name)
    started.set()
    results.put((name, race(name, where, threads, total, Go())))
