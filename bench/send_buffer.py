"""Buffered single enqueues from 8 threads: requests per job and added latency.

``python -m bench.send_buffer [--jobs 4000] [--threads 8] [--delay-ms 10]``
starts MiniStack behind the counting proxy (each request held
``--delay-ms``, as an in-region AWS call costs), then enqueues ``--jobs``
single jobs from ``--threads`` threads of one Flask app three ways: direct
(one SendMessage each), buffered outside a request (``SQS_JOBS_SEND_BUFFER_MS
= 10``, a worker or a script enqueueing), and buffered with one enqueue per
request (each request's teardown flushes the buffer). It prints the SQS
send requests per job and each enqueue call's p50 and p99 latency (for a
request: the enqueue plus its teardown's flush), against the direct sends of
the same run. Targets: <= 0.2 requests per job, <= 10 ms p99 added.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import typing as t

from bench.proxy import CountingProxy
from bench.proxy import Delay
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import sqs_client
from bench.servers import use_fake_aws

#: The SQS actions that send jobs.
SENDS = ("SendMessage", "SendMessageBatch")


def _app(endpoint: str, url: str, buffer_ms: int) -> t.Any:
    from flask import Flask
    from flask_sqs_jobs import SQSJobs

    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": url}},
        SQS_JOBS_ENDPOINT_URL=endpoint,
        SQS_JOBS_SEND_BUFFER_MS=buffer_ms,
    )
    jobs = SQSJobs(app)

    @jobs.task()
    def noop(n: int) -> None:
        """Nothing: the bench measures the send."""

    return app, noop


def run(
    proxy: CountingProxy, url: str, mode: str, jobs: int, threads: int
) -> dict[str, float]:
    """Enqueue ``jobs`` from ``threads`` threads; requests per job and latencies."""
    app, noop = _app(proxy.endpoint, url, 0 if mode == "direct" else 10)
    flush = app.extensions["sqs_jobs"].parts(app).flush_send_buffer
    per_thread = jobs // threads
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def enqueue(slot: int) -> None:
        with app.app_context():
            for n in range(per_thread):
                started = time.perf_counter()
                if mode == "per request":
                    with app.test_request_context("/"):  # its end flushes
                        noop.enqueue(n=n)
                else:
                    noop.enqueue(n=n)
                latencies[slot].append(time.perf_counter() - started)

    with app.app_context():
        noop.enqueue(n=-1)  # the client and its connections, before counting
        flush()
    proxy.reset()
    workers = [threading.Thread(target=enqueue, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    with app.app_context():
        flush()
    counts = proxy.snapshot()
    requests = sum(n for (action, _), n in counts.items() if action in SENDS)
    every = sorted(x for each in latencies for x in each)
    return {
        "requests": requests / (per_thread * threads),
        "p50": statistics.median(every),
        "p99": every[int(len(every) * 0.99) - 1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    args = parser.parse_args()
    use_fake_aws()
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    with ministack() as server:
        _, url = new_queue(sqs_client(server.endpoint), "buffer")
        delay = Delay.around(args.delay_ms, args.delay_ms / 5)
        with CountingProxy(server.endpoint, delay=delay) as proxy:
            results = {
                mode: run(proxy, url, mode, args.jobs, args.threads)
                for mode in ("direct", "buffered", "per request")
            }
    base = results["direct"]
    print(
        f"| {args.jobs} single enqueues, {args.threads} threads,"
        f" {args.delay_ms:g} ms per request | send requests per job"
        " | p50 | p99 | p99 added |\n| --- | ---: | ---: | ---: | ---: |"
    )
    for mode, got in results.items():
        print(
            f"| {mode} | {got['requests']:.3f} | {got['p50'] * 1000:.1f} ms"
            f" | {got['p99'] * 1000:.1f} ms"
            f" | {(got['p99'] - base['p99']) * 1000:+.1f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
