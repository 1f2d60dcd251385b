"""Raw boto3 figures on the same server: the drain ceiling and the enqueue baselines."""

from __future__ import annotations

import json
import queue
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from bench.servers import sqs_client
from bench.servers import SQSClient

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import DeleteMessageBatchRequestEntryTypeDef
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef


def wire_body(i: int) -> str:
    """A no-op job in the project's wire format."""
    return json.dumps({"job_type": "noop", "payload": {"i": i}})


def batches(jobs: int) -> Iterator[list[SendMessageBatchRequestEntryTypeDef]]:
    """SendMessageBatch entries for JOBS no-op jobs, 10 a request."""
    for start in range(0, jobs, 10):
        yield [
            {"Id": str(i - start), "MessageBody": wire_body(i)}
            for i in range(start, min(jobs, start + 10))
        ]


def prefill(endpoint: str, url: str, jobs: int, *, threads: int = 4) -> None:
    """Fill URL with JOBS no-op jobs through SendMessageBatch (not timed)."""
    clients = [sqs_client(endpoint) for _ in range(threads)]

    def send(numbered: tuple[int, list[SendMessageBatchRequestEntryTypeDef]]) -> None:
        number, entries = numbered
        sqs = clients[number % threads]
        failed = sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
        if failed:
            raise RuntimeError(f"pre-fill failed: {failed[0]}")

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(send, enumerate(batches(jobs))))


def raw_drain(endpoint: str, url: str, jobs: int, threads: int) -> float:
    """ReceiveMessage(10) + DeleteMessageBatch until JOBS are gone; returns seconds.

    A thread stops at its first empty receive: the queue was pre-filled, so nothing
    is left but what other threads hold.
    """
    clients = [sqs_client(endpoint) for _ in range(threads)]
    for sqs in clients:  # open each connection before the clock starts
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    lock = threading.Lock()
    deleted = 0
    deadline = time.monotonic() + 300

    def loop(sqs: SQSClient) -> None:
        nonlocal deleted
        while deleted < jobs and time.monotonic() < deadline:
            received = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            messages = received.get("Messages", [])
            if not messages:  # drained (or the rest is held by other threads)
                return
            entries: list[DeleteMessageBatchRequestEntryTypeDef] = [
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                for n, m in enumerate(messages)
            ]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
            with lock:
                deleted += len(messages)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(loop, clients))
    elapsed = time.perf_counter() - started
    if deleted < jobs:
        raise RuntimeError(f"raw drain timed out after {deleted}/{jobs} messages")
    return elapsed


def raw_send_loop(endpoint: str, url: str, jobs: int) -> float:
    """One SendMessage per job, single-threaded; returns seconds."""
    sqs = sqs_client(endpoint)
    sqs.send_message(QueueUrl=url, MessageBody=wire_body(-1))  # warm the connection
    started = time.perf_counter()
    for i in range(jobs):
        sqs.send_message(QueueUrl=url, MessageBody=wire_body(i))
    return time.perf_counter() - started


def raw_send_batch(endpoint: str, url: str, jobs: int) -> float:
    """SendMessageBatch of 10 per call, single-threaded; returns seconds."""
    sqs = sqs_client(endpoint)
    sqs.send_message(QueueUrl=url, MessageBody=wire_body(-1))
    started = time.perf_counter()
    for entries in batches(jobs):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return time.perf_counter() - started


def warm_up(endpoint: str, url: str) -> None:
    """Untimed traffic, so the first measured figure does not pay for a cold server."""
    prefill(endpoint, url, 500)
    raw_drain(endpoint, url, 500, threads=4)
    raw_send_loop(endpoint, url, 100)


def raw_pickup_latency(
    endpoint: str, url: str, samples: int, rng: random.Random
) -> list[float]:
    """Milliseconds from SendMessage to a raw long-polling receiver having the message.

    The server's own floor for idle pick-up latency: each probe is sent after a random
    pause to a receiver that long-polls one queue and has nothing else to do.
    """
    sender, receiver = sqs_client(endpoint), sqs_client(endpoint)
    picked: queue.Queue[float] = queue.Queue()
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            received = receiver.receive_message(
                QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=2
            )
            for message in received.get("Messages", []):
                sent_at = json.loads(message["Body"])["payload"]["sent_at"]
                picked.put((time.time() - sent_at) * 1000)
                receiver.delete_message(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"]
                )

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    latencies = []
    try:
        for _ in range(samples + 1):  # the first one is a warm-up
            time.sleep(rng.uniform(0.1, 2.0))
            body = {"job_type": "probe", "payload": {"sent_at": time.time()}}
            sender.send_message(QueueUrl=url, MessageBody=json.dumps(body))
            latencies.append(picked.get(timeout=30))
    finally:
        stop.set()
        thread.join(timeout=10)
    return latencies[1:]
