"""(e) Heartbeat calls failing: a message is never deleted after a failed extension.

Jobs outlive the visibility timeout (4 s), so each needs several extensions.
The proxy fails a share of them: non-retryable errors (``ReceiptHandleIsInvalid``,
``MessageNotInflight``, ``AccessDenied``) that the worker sees at once, and
retryable ones (HTTP 500, connection resets, dropped answers) that botocore
retries and that reach the worker only when every attempt failed. Most
extensions are delayed, so one is often in flight when its job ends.

Checked at the proxy: no delete ever carries a receipt handle after an
extension of it, sent while its handler still ran, was refused with a
non-retryable error (an extension sent after the handler returned only keeps
the message hidden while its delete is on the way). Checked in the logs:
once a worker logged ``heartbeat_failed`` for a message, that job's outcome is
``heartbeat_failed`` (never ``success``). And no job is lost.
"""

from __future__ import annotations

import random
import time
import typing as t

import pytest

from .conftest import Report
from .harness import assert_alive
from .harness import Harness
from .harness import plain_jobs
from .harness import receipts_of
from .harness import Run
from .harness import sized
from .harness import stop
from .harness import verdict
from .proxy import Exchange
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

WORKERS = 2
VISIBILITY_TIMEOUT = 4
EXTEND = frozenset({"ChangeMessageVisibility", "ChangeMessageVisibilityBatch"})
DELETE = frozenset({"DeleteMessage", "DeleteMessageBatch"})


def _handler_done_at(journal: list[Exchange], runs: list[Run]) -> dict[str, float]:
    """Receipt handle -> when the handler of that delivery finished its work."""
    done = {(run.mid, run.rc): run.t for run in runs if run.ev == "done"}
    finished: dict[str, float] = {}
    for exchange in journal:
        for message in (exchange.response or {}).get("Messages", []):
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0))
            at = done.get((message["MessageId"], count))
            if at is not None:
                finished[message["ReceiptHandle"]] = at
    return finished


def _deleted_after_refusal(journal: list[Exchange], runs: list[Run]) -> list[str]:
    """Receipt handles deleted after an extension the job depended on was refused.

    An extension sent while the handler still ran (or before the worker knew
    how it ended) decides: once refused, the message must not be deleted. One
    sent after the handler finished only keeps the message hidden while its
    delete is on the way (``Heartbeat.settle``): the decision was made.
    """
    finished = _handler_done_at(journal, runs)
    refused: dict[str, float] = {}
    violations: list[str] = []
    for exchange in journal:
        receipts = receipts_of(exchange.request)
        if exchange.action in EXTEND and exchange.fault is Fault.ERROR:
            for receipt in receipts:
                if exchange.arrived < finished.get(receipt, float("inf")):
                    refused.setdefault(receipt, exchange.at)
        elif exchange.action in DELETE:
            violations += [
                receipt
                for receipt in receipts
                if receipt in refused and refused[receipt] <= exchange.arrived
            ]
    return violations


@pytest.mark.timeout(900)
def test_failed_extension_is_never_followed_by_a_delete(
    harness: Harness, proxy: FaultProxy, report: Report
) -> None:
    rng = random.Random(5)
    queue = harness.queue("heartbeat", visibility_timeout=VISIBILITY_TIMEOUT)
    queues = {"default": queue}
    count = sized(40, 150)
    jobs = plain_jobs("heartbeat", count, (2500, 7000), rng)
    proxy.add(Rule(Fault.DELAY, EXTEND, probability=0.7, delay=(0.3, 1.0)))
    for code, status in (
        ("ReceiptHandleIsInvalid", 400),
        ("MessageNotInflight", 400),
        ("AccessDenied", 403),
    ):
        proxy.add(Rule(Fault.ERROR, EXTEND, probability=0.03, code=code, status=status))
    proxy.add(Rule(Fault.HTTP_500, EXTEND, probability=0.15))
    proxy.add(Rule(Fault.RESET, EXTEND, probability=0.05))
    proxy.add(Rule(Fault.DROP_RESPONSE, EXTEND, probability=0.05))
    workers = [harness.start_worker(queues, concurrency=4) for _ in range(WORKERS)]
    started = time.monotonic()
    harness.send(queue.url, jobs)

    def all_done() -> bool:
        assert_alive(workers)
        return {run.id for run in harness.runs() if run.ev == "done"} >= {
            job.id for job in jobs
        }

    deadline = time.monotonic() + 600
    while not all_done() and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the records
    proxy.clear()
    harness.wait_until_settled(
        queue.url, timeout=120, check=lambda: assert_alive(workers)
    )
    assert stop(workers) == [0] * WORKERS

    violations = _deleted_after_refusal(proxy.journal, harness.runs())
    wrong_outcomes: list[dict[str, t.Any]] = []
    heartbeat_failures = 0
    for worker in workers:
        for failure in worker.find("heartbeat_failed"):
            heartbeat_failures += 1
            # The delivery that was running: the next outcome of its message in
            # this worker (a worker holds one delivery of a message at a time).
            after = [
                e
                for e in worker.find("job_finished", message_id=failure["message_id"])
                if e["timestamp"] >= failure["timestamp"]
            ]
            if after and after[0]["outcome"] != "heartbeat_failed":
                wrong_outcomes.append({"failure": failure, "finished": after[0]})
    left = harness.drain(queue.url)
    dead = harness.drain(queue.dlq_url)
    result = verdict(jobs, harness.runs(), left, dead)
    report(
        "e: heartbeat calls failing",
        server=harness.server.kind,
        faults=dict(proxy.injected()),
        heartbeat_failures_logged=heartbeat_failures,
        seconds=round(time.monotonic() - started, 1),
        **result.row(),
    )
    assert not violations, f"deleted after a failed extension: {violations}"
    assert not wrong_outcomes, f"settled after a failed extension: {wrong_outcomes}"
    assert not result.lost, f"lost jobs: {result.lost}"
    assert heartbeat_failures > 0, "no extension failed: the scenario tested nothing"
