"""The Lambda handler in a real loop: a local event source mapping over moto_server.

The driver plays the mapping: it receives batches of up to ten messages,
hands each to the handler in a long-lived subprocess (as the Lambda runtime
does: cold start once, then one invocation at a time), deletes the records
the response does not report, and leaves the reported ones to come back.
Every 20th batch its delete is lost (the successes are made visible again),
so jobs arrive again after they ran: idempotency must keep them from
running twice.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import select
import subprocess
import sys
import time
import typing as t

import pytest
from flask_sqs_jobs import QueueGroup

from tests.aws_lambda.events import lambda_event
from tests.aws_lambda.events import queue_arn
from tests.aws_lambda.events import record_of
from tests.support import message_count

from .conftest import FAKE_AWS_ENV
from .conftest import MakeQueue
from .conftest import ROOT

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

JOBS = 1000
#: Every this many batches the mapping's delete is lost.
LOST_DELETE_EVERY = 20
#: The whole run's limit (a safety net against a hang, not a speed check): the
#: run's time is moto_server's, some 350 calls, which a 2-core machine served
#: in about 60 s at a load average of 3, and in 80 to 240 s at one of 10.
RUN_LIMIT_SECONDS = 420


class Runtime:
    """The handler's process: one JSON line in per invocation, one out."""

    def __init__(self, env: dict[str, str], log: t.IO[bytes]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.lambda_runtime"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=ROOT,
        )

    def invoke(self, event: dict[str, t.Any], remaining_seconds: float) -> t.Any:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        line = json.dumps({"event": event, "remaining_seconds": remaining_seconds})
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        assert ready, "the handler did not answer within 60 s"
        answer = self.process.stdout.readline()
        assert answer, f"the runtime exited ({self.process.poll()})"
        return json.loads(answer)

    def close(self) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


@pytest.mark.timeout(RUN_LIMIT_SECONDS + 60)
def test_a_thousand_jobs_with_failures_and_lost_deletes_run_once_each(
    sqs_endpoint: str,
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    tmp_path: pathlib.Path,
) -> None:
    url = make_queue("lambda", visibility_timeout=5)
    runs = tmp_path / "runs.jsonl"
    env = {
        **os.environ,
        **FAKE_AWS_ENV,
        "TEST_APP_ENDPOINT": sqs_endpoint,
        "TEST_APP_QUEUE_URL": url,
        "TEST_APP_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
        "TEST_APP_RUNS": str(runs),
        "PYTHONPATH": str(ROOT),
    }
    group = QueueGroup.build(boto_client=sqs_client, queues={"default": {"url": url}})
    arn = queue_arn(sqs_client, url)
    enqueued = 0
    idle = False

    outcomes: collections.Counter[str] = collections.Counter()
    batches = redelivered = 0
    with open(tmp_path / "runtime.log", "wb") as log:
        runtime = Runtime(env, log)
        try:
            deadline = time.monotonic() + RUN_LIMIT_SECONDS
            while enqueued < JOBS or not idle or message_count(sqs_client, url) > 0:
                assert time.monotonic() < deadline, "the jobs did not all finish"
                if enqueued < JOBS:
                    # The web app goes on enqueueing while the function runs.
                    batch = [("work", {"n": n}) for n in range(enqueued, enqueued + 10)]
                    group.enqueue_many("default", batch)
                    enqueued += len(batch)
                # One ReceiveMessage of up to ten, as the mapping's poller makes.
                records = [
                    record_of(message, arn)
                    for message in sqs_client.receive_message(
                        QueueUrl=url,
                        MaxNumberOfMessages=10,
                        WaitTimeSeconds=1 if idle else 0,
                        MessageSystemAttributeNames=["All"],
                        MessageAttributeNames=["All"],
                    ).get("Messages", [])
                ]
                idle = not records
                if idle:
                    continue
                answer = runtime.invoke(lambda_event(records), remaining_seconds=60)
                assert "error" not in answer, answer
                failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
                done = [r for r in records if r["messageId"] not in failed]
                outcomes["reported"] += len(failed)
                batches += 1
                if batches % LOST_DELETE_EVERY == 0:
                    redelivered += len(done)
                    changes = [(r["receiptHandle"], 0) for r in done]
                    if changes:
                        sqs_client.change_message_visibility_batch(
                            QueueUrl=url,
                            Entries=[
                                {
                                    "Id": str(i),
                                    "ReceiptHandle": h,
                                    "VisibilityTimeout": v,
                                }
                                for i, (h, v) in enumerate(changes)
                            ],
                        )
                elif done:
                    sqs_client.delete_message_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": r["receiptHandle"]}
                            for i, r in enumerate(done)
                        ],
                    )
        finally:
            runtime.close()

    attempts: dict[int, list[int]] = collections.defaultdict(list)
    for line in runs.read_text().splitlines():
        run = json.loads(line)
        attempts[run["n"]].append(run["attempt"])
    assert sorted(attempts) == list(range(JOBS)), "a job was lost"
    for n, seen in attempts.items():
        failing = n % 7 == 0 or n % 11 == 0
        assert len(seen) == (2 if failing else 1), (n, seen)
    expected_failures = sum(1 for n in range(JOBS) if n % 7 == 0 or n % 11 == 0)
    assert outcomes["reported"] == expected_failures
    assert redelivered > 0
    finished = collections.Counter(
        event.get("outcome")
        for event in map(
            json.loads, (tmp_path / "runtime.log").read_text().splitlines()
        )
        if event.get("event") == "job_finished"
    )
    assert finished["duplicate"] >= redelivered
    assert finished["success"] == JOBS
