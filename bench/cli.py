"""Command line and the order of the measurements."""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TypeVar

from bench import ceiling
from bench import ours
from bench import peers
from bench import procs
from bench import report
from bench.drain import Drain
from bench.drain import RUNS
from bench.envs import dist_versions
from bench.envs import log
from bench.envs import project_python
from bench.envs import python_version
from bench.envs import REPO
from bench.servers import drop_queue
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import POOL
from bench.servers import Server
from bench.servers import sqs_client
from bench.servers import use_fake_aws

SECTIONS = ("peers", "ours")
CONCURRENCY = (1, 4, 16)
SLEEP_MS = 50
OURS = "flask-sqs-jobs"
T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    repeat: int
    jobs: int
    latency_per_queue: int
    idle_window: float
    idle_waits: tuple[int, ...] = (2, 20)


def parse(argv: list[str]) -> tuple[argparse.Namespace, Sizes]:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark flask-sqs-jobs against raw boto3 and its peers.",
    )
    add = parser.add_argument
    add("--repeat", type=int, default=3, help="runs per figure, medians reported")
    add("--quick", action="store_true", help="smoke test: once each, small sizes")
    add("--only", action="append", choices=SECTIONS, help="this section only")
    add("--jobs", type=int, help="jobs per drain (2000; 200 with --quick)")
    add("--out", type=Path, default=REPO / "bench" / "results", help="output dir")
    args = parser.parse_args(argv)
    if args.quick:
        sizes = Sizes(1, args.jobs or 200, latency_per_queue=3, idle_window=20)
    else:
        repeat = max(1, args.repeat)
        sizes = Sizes(repeat, args.jobs or 2000, latency_per_queue=15, idle_window=60)
    return args, sizes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, sizes = parse(argv)
    sections = set(args.only or SECTIONS)
    use_fake_aws()
    signal.signal(signal.SIGTERM, _interrupt)
    runner = {"python": python_version(sys.executable)}
    runner.update(dist_versions(sys.executable, ["boto3", "botocore"]))
    results = report.Results(
        meta={
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python -m bench", *argv]),
            "machine": report.machine(),
            "server": "not started",
            "repeat": sizes.repeat,
            "jobs": sizes.jobs,
            "versions": {"bench runner": runner},
            "method": method_notes(sizes),
        }
    )
    try:
        installed = install_peers(results) if "peers" in sections else {}
        project = find_project(results) if "ours" in sections else None
        with ministack() as server:
            results.meta["server"] = f"{server.name} {server.version} on 127.0.0.1"
            results.meta["versions"]["server"] = {"ministack": server.version}
            warm_up(server)
            for round_no in range(1, sizes.repeat + 1):
                log(f"round {round_no}/{sizes.repeat}")
                measure_ceiling(results, server, sizes)
                for peer, python in installed.items():
                    measure_peer(results, peer, python, server, sizes)
                if project:
                    measure_ours(results, project, server, sizes)
            if project:
                measure_ours_idle(results, project, server, sizes)
    except KeyboardInterrupt:
        log("interrupted: writing what was measured so far")
        results.notes.append("The run was interrupted: some figures are missing.")
    finally:
        procs.kill_all()
        shutil.rmtree(RUNS, ignore_errors=True)
    json_path, md_path = report.write(results, args.out)
    log(f"wrote {json_path} and {md_path}")
    print(md_path.read_text())
    return 0


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_peers(results: report.Results) -> dict[peers.Peer, Path]:
    installed: dict[peers.Peer, Path] = {}
    for peer in peers.PEERS:
        try:
            python, versions = peers.install(peer)
        except Exception as exc:
            note(results, f"{peer.label}: not available: {exc}")
            continue
        installed[peer] = python
        results.meta["versions"][peer.key] = versions
    return installed


def find_project(results: report.Results) -> str | None:
    found = project_python()
    if found.python is None:
        note(results, f"{OURS}: not available: {found.error}")
        return None
    dists = [OURS, "boto3", "botocore", "structlog", "flask"]
    versions = {"python": python_version(found.python)}
    versions.update(dist_versions(found.python, dists))
    results.meta["versions"][OURS] = versions
    return found.python


def warm_up(server: Server) -> None:
    sqs = sqs_client(server.endpoint)
    _, url = new_queue(sqs, "warm-up")
    try:
        ceiling.warm_up(server.endpoint, url)
    finally:
        drop_queue(sqs, url)


def measure_ceiling(results: report.Results, server: Server, sizes: Sizes) -> None:
    sqs = sqs_client(server.endpoint)
    for threads in (1, 16):
        _, url = new_queue(sqs, f"raw-drain-{threads}")
        try:
            ceiling.prefill(server.endpoint, url, sizes.jobs)
            seconds = ceiling.raw_drain(server.endpoint, url, sizes.jobs, threads)
        finally:
            drop_queue(sqs, url)
        results.ceiling.setdefault(f"drain_{threads}", []).append(sizes.jobs / seconds)
        log(f"raw drain, {threads} thread(s): {sizes.jobs / seconds:,.0f} msgs/s")
    sends = {"send_loop": ceiling.raw_send_loop, "send_batch": ceiling.raw_send_batch}
    for key, send in sends.items():
        _, url = new_queue(sqs, f"raw-{key}")
        try:
            seconds = send(server.endpoint, url, sizes.jobs)
        finally:
            drop_queue(sqs, url)
        results.ceiling.setdefault(key, []).append(sizes.jobs / seconds)
        log(f"raw {key}: {sizes.jobs / seconds:,.0f} msgs/s")


def measure_peer(
    results: report.Results,
    peer: peers.Peer,
    python: Path,
    server: Server,
    sizes: Sizes,
) -> None:
    for sleep_ms in (0, SLEEP_MS):
        series = results.series(peer.label, peer.slots, sleep_ms, sizes.jobs)
        run = partial(peers.run_drain, peer, python, server, sleep_ms=sleep_ms)
        record(series, partial(run, jobs=sizes.jobs))


def measure_ours(
    results: report.Results, python: str, server: Server, sizes: Sizes
) -> None:
    for concurrency in CONCURRENCY:
        for sleep_ms in (0, SLEEP_MS):
            series = results.series(OURS, concurrency, sleep_ms, sizes.jobs)
            run = partial(ours.run_drain, python, server, jobs=sizes.jobs)
            record(series, partial(run, sleep_ms=sleep_ms, concurrency=concurrency))
    enqueued = attempt(
        results, "enqueue", partial(ours.run_enqueue, python, server, jobs=sizes.jobs)
    )
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
    name = f"{series.worker}, {series.slots} slot(s), {series.handler}"
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


def method_notes(sizes: Sizes) -> list[str]:
    pause = "0.1 s to min(idle_wait, 5) s"
    return [
        "Drain time runs from the first handler start to the moment every handler has "
        "returned and the queue shows no visible and no in-flight message. Start-up "
        "(process spawn to first handler start) is shown apart and not included. "
        "Handlers record each run in files, which counts them across threads and "
        "processes alike.",
        "Each worker runs in its own subprocess and virtualenv. Peak RSS is the "
        "largest VmHWM among the processes of the worker's session (read from /proc "
        "during and right after the drain).",
        f"boto3 clients use max_pool_connections={POOL}; AWS credentials are fake.",
        "The flask-sqs-jobs and sqs-job-worker subprocesses configure structlog with "
        "`structlog.configure(wrapper_class=structlog.make_filtering_bound_logger("
        "logging.WARNING))`, so logging at INFO costs nothing; Celery runs with "
        "--loglevel WARNING; dramatiq with its defaults (it logs no line per job).",
        "Peers run in their fair configuration: sqs-job-worker is single-threaded by "
        "design; dramatiq 2 processes x 8 threads; Celery the threads pool with 16 "
        "threads (gossip, mingle and heartbeat off), pre-filled through Celery itself.",
        f"Idle latency: {sizes.latency_per_queue} probes per queue and idle_wait, sent "
        f"in turn after a random pause of {pause}; with so few samples p99 is close to "
        "the maximum. Measured once, not repeated.",
        f"Requests per idle minute: counted over {sizes.idle_window:.0f} s after "
        "start-up and scaled to a minute. Measured once, not repeated.",
    ]
