"""Command line and the order of the measurements."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

from bench import ceiling
from bench import ours
from bench import peers
from bench import procs
from bench import render
from bench import report
from bench.drain import RUNS
from bench.envs import dist_versions
from bench.envs import log
from bench.envs import project_python
from bench.envs import python_version
from bench.envs import REPO
from bench.ours import OURS
from bench.ours import PRODUCTION
from bench.ours import QUIET
from bench.scenarios import measure_ceiling
from bench.scenarios import measure_ours
from bench.scenarios import measure_ours_idle
from bench.scenarios import measure_peer
from bench.scenarios import measure_slow
from bench.scenarios import note
from bench.scenarios import Plan
from bench.scenarios import Sizes
from bench.servers import drop_queue
from bench.servers import ministack
from bench.servers import new_queue
from bench.servers import POOL
from bench.servers import Server
from bench.servers import sqs_client
from bench.servers import use_fake_aws

SECTIONS = ("peers", "ours")


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
    add(
        "--logging",
        choices=(PRODUCTION, QUIET),
        default=PRODUCTION,
        help="structlog in the flask-sqs-jobs and sqs-job-worker processes: JSON "
        "lines at INFO as deployed (production), or INFO dropped (quiet)",
    )
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
            "logging_default": args.logging,
            "logging": logging_note(args.logging),
        }
    )
    try:
        installed = install_peers(results) if "peers" in sections else {}
        project = find_project(results) if "ours" in sections else None
        with ministack() as server:
            results.meta["server"] = f"{server.name} {server.version} on 127.0.0.1"
            results.meta["versions"]["server"] = {"ministack": server.version}
            warm_up(server)
            plan = Plan(
                sizes, args.logging, processes_missing(results, project, server)
            )
            for round_no in range(1, sizes.repeat + 1):
                log(f"round {round_no}/{sizes.repeat}")
                measure_ceiling(results, server.endpoint, sizes)
                for peer, python in installed.items():
                    measure_peer(results, peer, python, server, plan)
                if project:
                    measure_ours(results, project, server, plan)
                measure_slow(results, project, server, plan, seed=round_no)
            if project:
                measure_ours_idle(results, project, server, sizes)
    except KeyboardInterrupt:
        log("interrupted: writing what was measured so far")
        results.notes.append("The run was interrupted: some figures are missing.")
    finally:
        procs.kill_all()
        shutil.rmtree(RUNS, ignore_errors=True)
    json_path, md_path = render.write(results, args.out)
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
    dists = [OURS, "boto3", "botocore", "structlog", "orjson", "flask"]
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


def processes_missing(
    results: report.Results, python: str | None, server: Server
) -> str | None:
    """None when ``flask sqs-worker`` has ``--processes``, else why not."""
    if python is None:
        return f"not available: {OURS} is not available"
    try:
        found = ours.cli_has_processes(python, server)
    except Exception as exc:
        note(results, f"flask sqs-worker --help failed: {exc}")
        return f"not available: flask sqs-worker --help failed: {exc}"
    return None if found else "not available: --processes not supported by this version"


def logging_note(logging: str) -> str:
    if logging == QUIET:
        return (
            "--logging quiet: flask-sqs-jobs and sqs-job-worker drop INFO "
            "(`make_filtering_bound_logger(logging.WARNING)`), except the rows marked "
            "production"
        )
    return (
        "production (the default): flask-sqs-jobs and sqs-job-worker write JSON "
        "lines at INFO to a log file in .bench/logs/ (job_enqueued, job_started, "
        "job_finished per job) with structlog's fastest documented set-up, "
        "bench/LOGGING.md; rows marked quiet drop INFO"
    )


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
        "Logging: the flask-sqs-jobs and sqs-job-worker subprocesses use the "
        "configuration in each row's logging column: production is structlog's "
        "fastest documented set-up (bench/LOGGING.md: filtering bound logger at INFO, "
        "cached loggers, orjson and BytesLogger when orjson is installed) writing "
        "JSON lines to a file; quiet drops INFO. Celery runs with --loglevel "
        "WARNING; dramatiq with its defaults (it logs no line per job).",
        "flask sqs-worker rows run `flask --app bench/workers/ours_flask_app.py:"
        "create_app sqs-worker --concurrency 16 --idle-wait 1` (each job in its own "
        "app context) and are stopped with SIGTERM once every job ran; JobWorker rows "
        "embed the engine and call request_stop().",
        "10 ms per call: a proxy in its own process holds every request "
        "10 ms +- 2 ms (uniform, seeded per round and connection) before "
        "forwarding it to the same server, one thread per connection, keep-alive.",
        "Peers run in their fair configuration: sqs-job-worker is single-threaded by "
        "design; dramatiq 2 processes x 8 threads; Celery the threads pool with 16 "
        "threads (gossip, mingle and heartbeat off), pre-filled through Celery itself.",
        f"Idle latency: {sizes.latency_per_queue} probes per queue and idle_wait, sent "
        f"in turn after a random pause of {pause}; with so few samples p99 is close to "
        "the maximum. Measured once, not repeated.",
        f"Requests per idle minute: counted over {sizes.idle_window:.0f} s after "
        "start-up and scaled to a minute. Measured once, not repeated.",
    ]
