"""Where a no-op job's CPU goes, stage by stage, in the Flask worker as deployed.

``python -m bench.cpu_stages [--jobs N] [--slots 16] [--rate 250]`` starts
MiniStack and runs a child process under py-spy (a sampling profiler: it reads
the child's stacks from outside, at ``--rate`` samples a second, keeping only
the thread that holds the interpreter's lock: the one running Python). The child fills
a queue, then drains it with ``jobs.create_worker`` at ``--slots`` slots, logging
as deployed (``bench.worker_paths.production_logging``), and reports its CPU
time per job over the drain (``time.process_time``).

Each sample is given to the first stage whose rule matches a frame of its
stack (see :data:`STAGES`), and each stage's share of the drain's samples is
turned into microseconds per job with the measured CPU per job. The filling
is left out. Prints a Markdown table. py-spy must be on the ``PATH`` (``pip
install py-spy``); where the system forbids reading another process's memory
the bench says so and exits 2.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

#: (stage, pattern matched against each ``function (file:line)`` frame), first
#: match wins: log calls are counted as log lines wherever they happen.
STAGES: list[tuple[str, str]] = [
    ("stopping the worker (not counted)", r"request_stop|_shutdown\.py"),
    ("job records (the writer thread, its store)", r"store/records/|sqlalchemy/"),
    ("log context (structlog contextvars)", r"structlog/contextvars\.py"),
    ("log lines (structlog, JSON, file)", r"structlog/|/logging/"),
    ("decode body and attributes", r"engine/sqs/_wire|engine/model/untrusted/"),
    ("app context push and pop", r"flask/ctx\.py|werkzeug/local\.py"),
    ("Flask hooks and signals", r"flask_sqs_jobs/(_flask_hooks|signals)|blinker/"),
    (
        "reporting the outcome (hooks, counters)",
        r"engine/worker/_reporting|engine/model/_(worker_counts|multi_hooks|isolation)",
    ),
    ("ReceiveMessage requests (botocore)", r"^SqsQueue\.receive \("),
    ("DeleteMessageBatch requests (botocore)", r"engine/sqs/_batch_calls"),
    (
        "receive strategy (prefetch, receive pool)",
        r"engine/worker/_receive(_pipelined|_in_order|_health|r)\.py",
    ),
    (
        "settle (gathering deletes into batches)",
        r"engine/worker/_settl|engine/sqs/_group_commit",
    ),
    ("lease and heartbeat", r"engine/worker/_(lease|heartbeat)"),
    ("the handler", r"bench/worker_paths\.py"),
    (
        "running the job (runner, slot, middleware)",
        r"engine/worker/_(run|received_job|slots|delivery)|engine/model/|workflows/",
    ),
    ("other boto3 work", r"botocore/|boto3/|urllib3/"),
    ("thread hand-offs (queues, events)", r"threading\.py|queue\.py|concurrent/"),
    ("the worker's loop", r"engine/worker/"),
]
OTHER = "other"


def child(
    endpoint: str, jobs: int, slots: int, files: pathlib.Path, store_url: str | None
) -> None:
    """Fill a queue, say ``ready``, wait for ``go``, drain it with the Flask
    worker and write the CPU per job as JSON (``result.json``), in ``files``."""
    ready, go, result = (files / name for name in ("ready", "go", "result.json"))
    from flask import Flask
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs import SQSJobs

    from bench.records import Counter
    from bench.servers import new_queue
    from bench.servers import sqs_client
    from bench.servers import use_fake_aws
    from bench.worker_paths import noop
    from bench.worker_paths import production_logging

    use_fake_aws()
    production_logging()
    sqs = sqs_client(endpoint)
    _, url = new_queue(sqs, "stages")
    filler = QueueGroup.build(boto_client=sqs, queues={"default": {"url": url}})
    filler.enqueue_many("default", [("noop", {"i": i}) for i in range(jobs)])
    counter = Counter(jobs)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": url}},
        SQS_JOBS_ENDPOINT_URL=endpoint,
        SQS_JOBS_REGION_NAME="us-east-1",
    )
    if store_url is not None:  # job records on, in this store
        app.config["SQS_JOBS_STORE_URL"] = store_url
    ext = SQSJobs(app, boto_client=sqs)
    if store_url is not None:
        ext.store(app).create_tables()
    ext.handler("noop")(noop(counter))
    worker = ext.create_worker(app, concurrency=slots, idle_wait_seconds=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    ready.touch()  # the profiler attaches now: only the drain is sampled
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the profiler never attached")
        time.sleep(0.01)
    cpu = time.process_time()
    thread.start()
    if not counter.all_done.wait(300):
        raise RuntimeError(f"only {counter.done}/{jobs} jobs ran")
    if store_url is not None:  # the record writes are part of the drain
        from flask_sqs_jobs.store.records import recorder_of

        recorder = recorder_of(ext.parts(app).hooks)
        assert recorder is not None
        recorder.writer.flush(timeout=120)
    cpu = time.process_time() - cpu
    result.write_text(json.dumps({"cpu_us_per_job": cpu / jobs * 1e6}))
    worker.request_stop()
    thread.join(60)


def stage_of(stack: list[str]) -> str:
    """The first stage of :data:`STAGES` whose pattern matches a frame."""
    for stage, pattern in STAGES:
        compiled = _compiled(pattern)
        if any(compiled.search(frame) for frame in stack):
            return stage
    return OTHER


_patterns: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _patterns:
        _patterns[pattern] = re.compile(pattern)
    return _patterns[pattern]


def read_samples(path: pathlib.Path) -> collections.Counter[str]:
    """Samples per stage from py-spy's raw (collapsed stacks) output."""
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        counts[stage_of(stack.split(";"))] += int(count)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--rate", type=int, default=500, help="samples a second")
    parser.add_argument("--child", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument(
        "--records",
        action="store_true",
        help="job records on, in a SQLite store in a temporary directory",
    )
    parser.add_argument("--files", type=pathlib.Path, help=argparse.SUPPRESS)
    parser.add_argument("--store-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.jobs, args.slots, args.files, args.store_url)
        return 0
    spy = shutil.which("py-spy") or str(
        pathlib.Path(sys.executable).with_name("py-spy")
    )
    if not os.path.exists(spy):
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    from bench.servers import ministack

    with ministack() as server, tempfile.TemporaryDirectory() as tmp:
        files = pathlib.Path(tmp)
        out = files / "samples.txt"
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.cpu_stages",
                "--child",
                server.endpoint,
                "--jobs",
                str(args.jobs),
                "--slots",
                str(args.slots),
                "--files",
                str(files),
            ]
        )
        deadline = time.monotonic() + 120
        while not (files / "ready").exists() and worker.poll() is None:
            if time.monotonic() > deadline:
                worker.kill()
                raise RuntimeError("the worker never got ready")
            time.sleep(0.05)
        sampler = subprocess.Popen(
            [
                spy,
                "record",
                "--gil",
                "--format",
                "raw",
                "--rate",
                str(args.rate),
                "--output",
                str(out),
                "--pid",
                str(worker.pid),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # py-spy attaches (a bench, not a test)
        (files / "go").touch()
        worker.wait(600)
        _, errors = sampler.communicate(timeout=120)
        result = files / "result.json"
        if not out.exists() or not result.exists():
            print(
                "py-spy could not sample the worker (it needs to read another"
                f" process's memory: ptrace): {errors.strip()[-500:]}",
                file=sys.stderr,
            )
            return 2
        cpu = json.loads(result.read_text())["cpu_us_per_job"]
        counts = read_samples(out)
        if os.environ.get("KEEP_SAMPLES"):
            shutil.copy(out, os.environ["KEEP_SAMPLES"])
    setup = STAGES[0][0]
    counted = {stage: n for stage, n in counts.items() if stage != setup}
    total = sum(counted.values())
    print(
        f"{args.jobs} no-op jobs, Flask worker at {args.slots} slots, {server.name},"
        f" records {'on (SQLite)' if args.records else 'off'};"
        f" {cpu:.0f} us of CPU a job in all, {total} samples"
    )
    print("| stage | share | us/job |")
    print("| --- | ---: | ---: |")
    order = [stage for stage, _ in STAGES[1:]] + [OTHER]
    for stage in order:
        share = counted.get(stage, 0) / total if total else 0.0
        print(f"| {stage} | {share:.0%} | {share * cpu:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
