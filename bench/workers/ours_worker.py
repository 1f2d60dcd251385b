"""flask-sqs-jobs in its own process (run by a python that imports flask_sqs_jobs).

Modes (BENCH_CONFIG["mode"]):
- ``drain``: one queue, JobWorker at the given concurrency, stopped with request_stop()
  from another thread once every job ran.
- ``enqueue``: times ``enqueue`` in a loop and ``enqueue_many``; writes seconds as JSON.
- ``serve``: three queues with weights, a ``probe`` handler that records send-to-start
  latency; runs until SIGTERM (for the idle latency and idle request counts).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from _common import config
from _common import configure_logging
from _common import Counters
from _common import FLAGS
from botocore.config import Config


def main() -> None:
    cfg = config()
    configure_logging(cfg)
    from flask_sqs_jobs import JobWorker
    from flask_sqs_jobs import QueueGroup

    sqs = boto3.client(
        "sqs", endpoint_url=cfg["endpoint"], config=Config(max_pool_connections=32)
    )
    if cfg["mode"] == "drain":
        counters = Counters(cfg["counters"], cfg["sleep_ms"], cfg["jobs"])
        queues = QueueGroup.build(
            boto_client=sqs, queues={"default": {"url": cfg["url"]}}
        )
        worker = JobWorker(
            queues,
            {"noop": counters.run},
            idle_wait_seconds=1,
            concurrency=cfg["concurrency"],
        )

        def stop_when_done() -> None:
            counters.all_done.wait()
            worker.request_stop()

        threading.Thread(target=stop_when_done, daemon=True).start()
        raise SystemExit(worker.run())
    if cfg["mode"] == "enqueue":
        enqueue(
            QueueGroup.build(
                boto_client=sqs,
                queues={"loop": {"url": cfg["url"]}, "many": {"url": cfg["url_many"]}},
            ),
            cfg,
        )
        return
    queues = QueueGroup.build(
        boto_client=sqs,
        queues={
            name: {"url": url, "weight": weight} for name, url, weight in cfg["queues"]
        },
    )
    probes = os.open(Path(cfg["counters"]) / "probes", FLAGS, 0o644)

    def probe(payload: dict[str, Any]) -> None:
        os.write(
            probes,
            f"{payload['queue']} {time.time() - payload['sent_at']:.6f}\n".encode(),
        )

    worker = JobWorker(
        queues, {"probe": probe}, idle_wait_seconds=cfg["idle_wait"], concurrency=1
    )
    signal.signal(signal.SIGTERM, lambda _signum, _frame: worker.request_stop())
    raise SystemExit(worker.run())


def enqueue(queues: Any, cfg: dict[str, Any]) -> None:
    jobs: int = cfg["jobs"]
    queues.enqueue(
        "loop", "noop", {"i": -1}
    )  # warm the connection and any one-time reads
    started = time.perf_counter()
    for i in range(jobs):
        queues.enqueue("loop", "noop", {"i": i})
    result: dict[str, Any] = {"enqueue": time.perf_counter() - started}
    if hasattr(queues, "enqueue_many"):
        queues.enqueue_many("many", [("noop", {"i": -1})])
        batch = [("noop", {"i": i}) for i in range(jobs)]
        started = time.perf_counter()
        ids = queues.enqueue_many("many", batch)
        result["enqueue_many"] = time.perf_counter() - started
        if len(ids) != jobs:
            raise SystemExit(f"enqueue_many returned {len(ids)} ids for {jobs} jobs")
    else:
        result["enqueue_many_error"] = "QueueGroup has no enqueue_many"
    Path(cfg["result"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
