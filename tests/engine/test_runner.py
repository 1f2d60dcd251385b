"""run_worker: a worker as a process's main loop, stopped by SIGTERM or SIGINT."""

from __future__ import annotations

import os
import signal
import typing as t

import pytest
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import run_worker
from flask_sqs_jobs.engine.worker import _receive_health

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.engine.helpers import WAIT
from tests.support import message_count
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

MISSING_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/does-not-exist"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_lets_the_running_job_finish_then_returns(
    sqs: SQSClient, queue_url: str, signum: signal.Signals
) -> None:
    group = one_queue_group(sqs, queue_url)
    for n in range(2):
        group.enqueue("jobs", "work", {"n": n})
    previous = signal.getsignal(signum)
    stop_seen_by_job: list[bool] = []

    def work(payload: Payload) -> None:
        os.kill(os.getpid(), signum)
        stop_seen_by_job.append(worker.stop_event.wait(WAIT))

    worker = JobWorker(group, {"work": work}, idle_wait_seconds=0)

    run_worker(group, {"work": work}, worker=worker)

    assert stop_seen_by_job == [True]
    assert message_count(sqs, queue_url) == 1
    assert len(visible_messages(sqs, queue_url)) == 1
    assert signal.getsignal(signum) is previous


def test_queue_group_run_worker_exits_1_after_persistent_receive_failures(
    sqs: SQSClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_receive_health, "MAX_RECEIVE_BACKOFF", 0.0)
    group = QueueGroup({"gone": {"queue": SqsQueue(MISSING_URL, boto_client=sqs)}})
    previous = signal.getsignal(signal.SIGTERM)

    with pytest.raises(SystemExit) as info:
        group.run_worker({"work": lambda p: None}, idle_wait_seconds=0)

    assert info.value.code == 1
    assert signal.getsignal(signal.SIGTERM) is previous


def test_run_worker_needs_a_handler(sqs: SQSClient, queue_url: str) -> None:
    group = one_queue_group(sqs, queue_url)

    with pytest.raises(ValueError, match="handler"):
        group.run_worker({})
