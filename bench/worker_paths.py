"""The worker's own cost: slots, threads and the Flask path, in one process, one run.

``python -m bench.worker_paths [--jobs N] [--repeat R] [--slots 1,4,16,64]
[--delay-ms 10]`` starts
MiniStack (``bench.servers.ministack``) and drains pre-filled queues of no-op
jobs in this process, logging as deployed (JSON lines at INFO, the production
configuration of ``LOGGING.md`` with the standard ``json`` module, to a file in
``.bench/logs/``), interleaved ``--repeat`` times:

- ``JobWorker`` at each ``--slots`` value;
- the Flask layer's worker at 16 slots (``jobs.create_worker``: each job in its
  own app context, the app's hooks and signals, as ``flask sqs-worker`` runs it);
- ``JobWorker`` at 16 and 64 slots on jobs that sleep 50 ms, against the ideal;
- with ``--delay-ms`` (10 by default, 0 to skip): ``JobWorker`` at 16 and 64
  slots and the Flask worker at 16, through ``bench.proxy`` holding every call
  that long (+- 20 %), as an in-region AWS call costs.

For each drain: jobs per second from the first handler start until every job
ran, the CPU time of this process per job (``time.process_time``; the server
runs in its own process), and the most threads alive during the drain. Prints a
Markdown table of medians and each rate's ratio to the 16-slot ``JobWorker`` of
the same run (through the proxy: to the one through the proxy).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import threading
import time
import typing as t

import structlog

from bench.proxy import delaying_proxy
from bench.records import Counter
from bench.servers import LOGS
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws


def noop(counter: Counter, sleep: float = 0.0) -> t.Callable[[object], None]:
    """A no-op handler (or one that sleeps) that counts its job in ``counter``."""

    def run(payload: object = None) -> None:
        counter.started()
        if sleep:
            time.sleep(sleep)
        counter.finished()

    return run


class ThreadPeak:
    """The most threads alive while it runs, sampled every 20 ms."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ThreadPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, threading.active_count() - 1)


class Row(t.NamedTuple):
    label: str
    slots: int
    flask: bool = False
    proxied: bool = False  # through the delaying proxy
    sleep: float = 0.0  # seconds each job sleeps


class Drain(t.NamedTuple):
    rate: float  # jobs per second
    cpu_us: float  # CPU microseconds of this process per job
    threads: int  # most threads alive during the drain


def production_logging() -> None:
    """JSON lines at INFO (LOGGING.md, stdlib json) to .bench/logs/worker_paths.log."""
    LOGS.mkdir(parents=True, exist_ok=True)
    out = (LOGS / "worker_paths.log").open("w")
    structlog.configure(
        cache_logger_on_first_use=True,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(file=out),
    )


def drain(
    endpoint: str,
    *,
    jobs: int,
    slots: int,
    flask: bool,
    via: str | None = None,
    sleep: float = 0.0,
) -> Drain:
    """Pre-fill a queue with ``jobs`` no-op jobs and drain it once (``via``: the
    worker's endpoint, a proxy in front of ``endpoint``)."""
    from flask import Flask
    from flask_sqs_jobs import JobWorker
    from flask_sqs_jobs import QueueGroup
    from flask_sqs_jobs import SQSJobs

    sqs = sqs_client(endpoint)
    _, url = new_queue(sqs, "paths")
    filler = QueueGroup.build(boto_client=sqs, queues={"default": {"url": url}})
    filler.enqueue_many("default", [("noop", {"i": i}) for i in range(jobs)])
    client = sqs if via is None else sqs_client(via)
    counter = Counter(jobs)
    worker: t.Any
    if flask:
        app = Flask(__name__)
        app.config.update(
            SQS_JOBS_QUEUES={"default": {"url": url}},
            SQS_JOBS_ENDPOINT_URL=via or endpoint,
            SQS_JOBS_REGION_NAME="us-east-1",
        )
        ext = SQSJobs(app, boto_client=client)
        ext.handler("noop")(noop(counter, sleep))
        worker = ext.create_worker(app, concurrency=slots, idle_wait_seconds=1)
    else:
        group = QueueGroup.build(boto_client=client, queues={"default": {"url": url}})
        worker = JobWorker(
            group,
            {"noop": noop(counter, sleep)},
            idle_wait_seconds=1,
            concurrency=slots,
        )
    thread = threading.Thread(target=worker.run, daemon=True)
    with ThreadPeak() as peak:
        cpu = time.process_time()
        thread.start()
        if not counter.all_done.wait(300):
            raise RuntimeError(f"only {counter.done}/{jobs} jobs ran")
        finished = time.monotonic()
        cpu = time.process_time() - cpu
    worker.request_stop()
    thread.join(60)
    sqs.delete_queue(QueueUrl=url)
    assert counter.first_start is not None
    rate = jobs / (finished - counter.first_start)
    return Drain(rate, cpu / jobs * 1e6, peak.peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs a drain")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slots", default="1,4,16,64")
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=10.0,
        help="also drain at 16 and 64 slots through a proxy adding this per call"
        " (+- 20 %%); 0: not",
    )
    args = parser.parse_args()
    use_fake_aws()
    production_logging()
    rows = [Row(f"JobWorker, {s} slots", s) for s in map(int, args.slots.split(","))]
    rows.append(Row("flask worker, 16 slots", 16, flask=True))
    rows += [Row(f"JobWorker, {s} slots, 50 ms jobs", s, sleep=0.05) for s in (16, 64)]
    if args.delay_ms:
        late = f"{args.delay_ms:.0f} ms per call"
        rows += [
            Row(f"JobWorker, {s} slots, {late}", s, proxied=True) for s in (16, 64)
        ]
        rows.append(
            Row(f"flask worker, 16 slots, {late}", 16, flask=True, proxied=True)
        )
    results: dict[str, list[Drain]] = {row.label: [] for row in rows}
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ministack())
        via = None
        if args.delay_ms:
            via = stack.enter_context(
                delaying_proxy(
                    server.endpoint,
                    delay_ms=args.delay_ms,
                    jitter_ms=args.delay_ms / 5,
                    seed=1,
                    log_path=LOGS / "worker-paths-proxy.log",
                )
            )
        drain(server.endpoint, jobs=200, slots=16, flask=True)  # warm-up
        for _ in range(args.repeat):
            for row in rows:
                results[row.label].append(
                    drain(
                        server.endpoint,
                        jobs=args.jobs,
                        slots=row.slots,
                        flask=row.flask,
                        via=via if row.proxied else None,
                        sleep=row.sleep,
                    )
                )
    print(f"{args.jobs} jobs a drain, {server.name}, medians of {args.repeat};")
    print("ratio: x JobWorker at 16 slots (through the proxy: the same through it);")
    print("50 ms jobs: x the ideal (slots / 50 ms)")
    print("| drain | jobs/s | ratio | CPU us/job | threads |")
    print("| --- | ---: | ---: | ---: | ---: |")
    bases = {False: "JobWorker, 16 slots"}
    if args.delay_ms:
        bases[True] = f"JobWorker, 16 slots, {late}"
    for row in rows:
        drains = results[row.label]
        base = statistics.median(d.rate for d in results[bases[row.proxied]])
        rate = statistics.median(d.rate for d in drains)
        if row.sleep:  # against the ideal: every slot busy all the time
            base = row.slots / row.sleep
        cpu = statistics.median(d.cpu_us for d in drains)
        threads = max(d.threads for d in drains)
        print(
            f"| {row.label} | {rate:.0f} | {rate / base:.2f} | {cpu:.0f} | {threads} |"
        )


if __name__ == "__main__":
    main()
