"""Large payloads through S3: flask-sqs-jobs against raw boto3 on the same server.

``python -m bench.large_payloads [--jobs N] [--size-mib M] [--concurrency C]``
starts ``moto_server`` (S3 and SQS on one endpoint; needs ``moto[server]``,
the ``local`` extra) and measures, for jobs of ``--size-mib`` MiB:

- enqueue: ``QueueGroup.enqueue`` with large payloads on, against a raw loop
  of PutObject + SendMessage (the pointer) per job;
- drain: ``JobWorker`` with ``--concurrency`` slots, against a raw loop of
  ReceiveMessage + GetObject + DeleteMessage + DeleteObject per job (one
  thread per slot).

It prints a Markdown table of jobs per second. Figures on a local server say
what the library adds per job, not what S3 costs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import typing as t
import urllib.request
import uuid
from collections.abc import Iterator

import boto3
from botocore.config import Config

from bench.servers import free_port
from bench.servers import use_fake_aws

REGION = "us-east-1"
POINTER = "software.amazon.payloadoffloading.PayloadS3Pointer"


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def clients(endpoint: str) -> tuple[t.Any, t.Any]:
    os.environ["AWS_ENDPOINT_URL_S3"] = endpoint
    config = Config(max_pool_connections=32)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, config=config)
    return sqs, boto3.client("s3", region_name=REGION, config=config)


def raw_enqueue(
    sqs: t.Any, s3: t.Any, url: str, bucket: str, payload: dict[str, t.Any]
) -> None:
    """What a hand-written producer does: encode the job, PutObject, SendMessage."""
    key = f"raw/{uuid.uuid4()}"
    data = json.dumps({"job_type": "big", "payload": payload}).encode()
    s3.put_object(Bucket=bucket, Key=key, Body=data)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps([POINTER, {"s3BucketName": bucket, "s3Key": key}]),
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(data))}
        },
    )


def raw_drain(sqs: t.Any, s3: t.Any, url: str, jobs: int, threads: int) -> None:
    done = 0
    lock = threading.Lock()

    def loop() -> None:
        nonlocal done
        while True:
            with lock:
                if done >= jobs:
                    return
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=1,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            for message in messages:
                pointer = json.loads(message["Body"])[1]
                bucket, key = pointer["s3BucketName"], pointer["s3Key"]
                json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                s3.delete_object(Bucket=bucket, Key=key)
                with lock:
                    done += 1

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def timed(action: t.Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.large_payloads")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--size-mib", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    use_fake_aws()
    from flask_sqs_jobs import JobWorker
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs.engine import LargePayloads

    blob = "x" * int(args.size_mib * 1024 * 1024)
    with moto_server() as endpoint:
        sqs, s3 = clients(endpoint)
        bucket = f"bench-payloads-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket)
        raw_url = sqs.create_queue(QueueName=f"bench-raw-{uuid.uuid4().hex[:8]}")[
            "QueueUrl"
        ]
        ours_url = sqs.create_queue(QueueName=f"bench-ours-{uuid.uuid4().hex[:8]}")[
            "QueueUrl"
        ]
        group = QueueGroup.build(
            boto_client=sqs,
            queues={"jobs": {"url": ours_url}},
            large_payloads=LargePayloads(s3, bucket=bucket),
        )
        raw_in = timed(
            lambda: [
                raw_enqueue(sqs, s3, raw_url, bucket, {"blob": blob})
                for _ in range(args.jobs)
            ]
        )
        ours_in = timed(
            lambda: [
                group.enqueue("jobs", "big", {"blob": blob}) for _ in range(args.jobs)
            ]
        )
        raw_out = timed(
            lambda: raw_drain(sqs, s3, raw_url, args.jobs, args.concurrency)
        )
        ran = 0
        lock = threading.Lock()

        def handler(payload: dict[str, t.Any]) -> None:
            nonlocal ran
            with lock:
                ran += 1

        worker = JobWorker(
            group,
            {"big": handler},
            should_stop=lambda: ran >= args.jobs,
            idle_wait_seconds=1,
            concurrency=args.concurrency,
        )
        ours_out = timed(worker.run)
    rate = args.jobs
    print(
        f"| {args.jobs} jobs of {args.size_mib:g} MiB | raw boto3 | flask-sqs-jobs |"
        f" ratio |\n| --- | --- | --- | --- |\n"
        f"| enqueue (jobs/s) | {rate / raw_in:.1f} | {rate / ours_in:.1f} |"
        f" {raw_in / ours_in:.2f} |\n"
        f"| drain, {args.concurrency} threads (jobs/s) | {rate / raw_out:.1f} |"
        f" {rate / ours_out:.1f} | {raw_out / ours_out:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
