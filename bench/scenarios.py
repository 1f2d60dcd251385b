"""One round: the ceiling, the peers, flask-sqs-jobs, and the 10 ms per call runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from typing import TypeVar

from bench import ceiling
from bench import ours
from bench import peers
from bench import report
from bench.drain import Drain
from bench.envs import log
from bench.ours import CLI
from bench.ours import EMBEDDED
from bench.ours import OURS
from bench.ours import PRODUCTION
from bench.ours import QUIET
from bench.proxy import delaying_proxy
from bench.servers import drop_queue
from bench.servers import LOGS
from bench.servers import new_queue
from bench.servers import Server
from bench.servers import sqs_client
from bench.targets import CLI_PROCESSES
from bench.targets import PROCESSES

CONCURRENCY = (1, 4, 16)
SLEEP_MS = 50
DELAY_MS, JITTER_MS = 10.0, 2.0
T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    repeat: int
    jobs: int
    latency_per_queue: int
    idle_window: float
    idle_waits: tuple[int, ...] = (2, 20)


@dataclass(frozen=True)
class Plan:
    sizes: Sizes
    logging: str  # PRODUCTION or QUIET: every flask-sqs-jobs and sqs-job-worker run
    no_processes: str | None  # why --processes cannot run, None when it can


def measure_ceiling(
    results: report.Results, endpoint: str, sizes: Sizes, *, prefix: str = ""
) -> None:
    """Raw boto3 drains through ENDPOINT (and, without PREFIX, the enqueue baselines).

    The queues live on the server behind ENDPOINT whatever proxy ENDPOINT is.
    """
    sqs = sqs_client(endpoint)
    for threads in (16, 1):
        _, url = new_queue(sqs, f"raw-drain-{threads}")
        try:
            ceiling.prefill(endpoint, url, sizes.jobs)
            seconds = ceiling.raw_drain(endpoint, url, sizes.jobs, threads)
        finally:
            drop_queue(sqs, url)
        rate = sizes.jobs / seconds
        results.ceiling.setdefault(f"{prefix}drain_{threads}", []).append(rate)
        where = ", 10 ms per call" if prefix else ""
        log(f"raw drain{where}, {threads} thread(s): {rate:,.0f} msgs/s")
    if prefix:
        return
    sends = {"send_loop": ceiling.raw_send_loop, "send_batch": ceiling.raw_send_batch}
    for key, send in sends.items():
        _, url = new_queue(sqs, f"raw-{key}")
        try:
            seconds = send(endpoint, url, sizes.jobs)
        finally:
            drop_queue(sqs, url)
        results.ceiling.setdefault(key, []).append(sizes.jobs / seconds)
        log(f"raw {key}: {sizes.jobs / seconds:,.0f} msgs/s")


PEER_LOGGING = {"dramatiq": "dramatiq defaults", "celery": "--loglevel WARNING"}


def measure_peer(
    results: report.Results, peer: peers.Peer, python: Path, server: Server, plan: Plan
) -> None:
    logging = PEER_LOGGING.get(peer.key, plan.logging)
    processes = PROCESSES if peer.key == "dramatiq" else 1
    for sleep_ms in (0, SLEEP_MS):
        series = results.series(
            peer.label,
            peer.slots,
            sleep_ms,
            plan.sizes.jobs,
            logging=logging,
            processes=processes,
        )
        run = partial(peers.run_drain, peer, python, server, sleep_ms=sleep_ms)
        record(series, partial(run, jobs=plan.sizes.jobs, logging=plan.logging))


def _ours_drain(
    results: report.Results,
    python: str,
    server: Server,
    plan: Plan,
    *,
    sleep_ms: int,
    concurrency: int = 16,
    how: str = EMBEDDED,
    logging: str | None = None,
    processes: int | None = None,
    worker_endpoint: str | None = None,
) -> None:
    logging = logging or plan.logging
    variant: dict[str, Any] = {
        "how": how if not processes else CLI_PROCESSES,
        "logging": logging,
        "network": report.SLOW if worker_endpoint else report.LOCAL,
        "processes": processes or 1,
    }
    slots = concurrency * (processes or 1)
    series = results.series(OURS, slots, sleep_ms, plan.sizes.jobs, **variant)
    if processes and plan.no_processes:
        series.error = plan.no_processes
        log(f"{series.name}: {plan.no_processes}")
        return
    run = partial(
        ours.run_drain,
        python,
        server,
        jobs=plan.sizes.jobs,
        sleep_ms=sleep_ms,
        concurrency=concurrency,
        logging=logging,
        how=how,
        processes=processes,
        worker_endpoint=worker_endpoint,
    )
    record(series, run)


def measure_ours(
    results: report.Results, python: str, server: Server, plan: Plan
) -> None:
    drain = partial(_ours_drain, results, python, server, plan)
    for concurrency in CONCURRENCY:
        for sleep_ms in (0, SLEEP_MS):
            drain(sleep_ms=sleep_ms, concurrency=concurrency)
    other = QUIET if plan.logging == PRODUCTION else PRODUCTION
    drain(sleep_ms=0, logging=other)  # the cost of logging, side by side
    for sleep_ms in (0, SLEEP_MS):
        drain(sleep_ms=sleep_ms, how=CLI)
    drain(sleep_ms=0, how=CLI, processes=PROCESSES)
    run = partial(ours.run_enqueue, python, server, jobs=plan.sizes.jobs)
    enqueued = attempt(results, "enqueue", partial(run, logging=plan.logging))
    if enqueued is None:
        return
    results.enqueue.setdefault("enqueue", []).append(enqueued.enqueue_rate)
    log(f"enqueue loop: {enqueued.enqueue_rate:,.0f} msgs/s")
    if enqueued.enqueue_many_rate is not None:
        results.enqueue.setdefault("enqueue_many", []).append(
            enqueued.enqueue_many_rate
        )
        log(f"enqueue_many: {enqueued.enqueue_many_rate:,.0f} msgs/s")
    else:
        note(results, f"enqueue_many: not available: {enqueued.enqueue_many_error}")


def measure_slow(
    results: report.Results, python: str | None, server: Server, plan: Plan, seed: int
) -> None:
    """Everything through a proxy that holds each request 10 ms +- 2 ms."""
    log(f"through a proxy adding {DELAY_MS:.0f} ms +- {JITTER_MS:.0f} ms per call")
    with delaying_proxy(
        server.endpoint,
        delay_ms=DELAY_MS,
        jitter_ms=JITTER_MS,
        seed=seed,
        log_path=LOGS / "delaying-proxy.log",
    ) as endpoint:
        measure_ceiling(results, endpoint, plan.sizes, prefix="proxy_")
        if python is None:
            return
        drain = partial(_ours_drain, results, python, server, plan)
        for how in (EMBEDDED, CLI):
            for sleep_ms in (0, SLEEP_MS):
                drain(sleep_ms=sleep_ms, how=how, worker_endpoint=endpoint)


def measure_ours_idle(
    results: report.Results, python: str, server: Server, sizes: Sizes
) -> None:
    rng = random.Random()
    log("idle pick-up latency, raw long poll")
    samples = sizes.latency_per_queue * len(ours.QUEUES)
    raw = attempt(
        results, "raw long-poll latency", partial(raw_latency, server, samples, rng)
    )
    results.raw_latency = raw or []
    for wait in sizes.idle_waits:
        log(f"idle pick-up latency, idle_wait_seconds={wait}")
        latency = attempt(
            results,
            f"idle latency at idle_wait_seconds={wait}",
            partial(
                ours.run_latency,
                python,
                server,
                idle_wait=wait,
                per_queue=sizes.latency_per_queue,
                rng=rng,
            ),
        )
        if latency is not None:
            results.latency[wait] = latency
        log(f"requests per idle minute, idle_wait_seconds={wait}")
        idle = attempt(
            results,
            f"idle requests at idle_wait_seconds={wait}",
            partial(
                ours.run_idle, python, server, idle_wait=wait, window=sizes.idle_window
            ),
        )
        if idle is not None:
            results.idle[wait] = idle


def raw_latency(server: Server, samples: int, rng: random.Random) -> list[float]:
    sqs = sqs_client(server.endpoint)
    _, url = new_queue(sqs, "raw-latency")
    try:
        return ceiling.raw_pickup_latency(server.endpoint, url, samples, rng)
    finally:
        drop_queue(sqs, url)


def record(series: report.DrainSeries, run: Callable[[], Drain]) -> None:
    name = f"{series.name}, {series.layout} slot(s), {series.handler}"
    name += f", {series.logging} logging" if series.logging else ""
    name += ", 10 ms per call" if series.network == report.SLOW else ""
    try:
        result = run()
    except Exception as exc:
        series.error = str(exc)
        log(f"{name}: failed: {exc}")
        return
    series.runs.append(result)
    log(
        f"{name}: {result.jobs} jobs in {result.seconds:.2f} s "
        f"({result.rate:,.1f}/s), start-up {result.startup_seconds:.2f} s"
    )


def attempt(results: report.Results, name: str, run: Callable[[], T]) -> T | None:
    try:
        return run()
    except Exception as exc:
        note(results, f"{name}: failed: {exc}")
        return None


def note(results: report.Results, text: str) -> None:
    log(text)
    if text not in results.notes:
        results.notes.append(text)
