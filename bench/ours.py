"""flask-sqs-jobs in a subprocess, through its public API only.

Drains run either the embedded ``JobWorker`` (bench/workers/ours_worker.py) or the
``flask sqs-worker`` command on a tiny app (bench/workers/ours_flask_app.py).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import drain as drains
from bench import procs
from bench.ceiling import prefill
from bench.envs import project_env
from bench.envs import REPO
from bench.envs import tail
from bench.envs import WORKERS_DIR
from bench.proxy import CountingProxy
from bench.servers import drop_queue
from bench.servers import LOGS
from bench.servers import new_queue
from bench.servers import Server
from bench.servers import sqs_client
from bench.servers import SQSClient

SCRIPT = str(WORKERS_DIR / "ours_worker.py")
FLASK_APP = f"{WORKERS_DIR / 'ours_flask_app.py'}:create_app"
OURS = "flask-sqs-jobs"
EMBEDDED, CLI = "JobWorker", "flask sqs-worker"
PRODUCTION, QUIET = "production", "quiet"  # BENCH_CONFIG["logging"]
# (logical name, weight) of the queues behind the idle figures
QUEUES = (("high", 5), ("mid", 2), ("low", 1))


def _env(cfg: dict[str, object]) -> dict[str, str]:
    return {**project_env(), "BENCH_CONFIG": json.dumps(cfg)}


def cli_args(python: str, concurrency: int, processes: int | None) -> list[str]:
    """``flask sqs-worker`` on the bench app, optionally with ``--processes``."""
    args = [python, "-m", "flask", "--app", FLASK_APP, "sqs-worker"]
    args += ["--concurrency", str(concurrency), "--idle-wait", "1"]
    return args + (["--processes", str(processes)] if processes else [])


def cli_has_processes(python: str, server: Server) -> bool:
    """Whether this version's ``flask sqs-worker --help`` lists ``--processes``."""
    counters = drains.counter_dir()
    cfg = {"url": f"{server.endpoint}/000000000000/none", "endpoint": server.endpoint}
    cfg.update({"counters": str(counters), "sleep_ms": 0, "jobs": 1})
    try:
        done = subprocess.run(
            [*cli_args(python, 1, None)[:-4], "--help"],
            env=_env({**cfg, "logging": "quiet"}),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(counters, ignore_errors=True)
    if done.returncode != 0:
        raise drains.WorkerFailed(f"flask sqs-worker --help: {tail(done.stderr)}")
    return "--processes" in done.stdout


def run_drain(
    python: str,
    server: Server,
    *,
    jobs: int,
    sleep_ms: int,
    concurrency: int,
    logging: str = "production",
    how: str = EMBEDDED,
    processes: int | None = None,
    worker_endpoint: str | None = None,
) -> drains.Drain:
    """Drain JOBS pre-filled jobs; the worker talks to WORKER_ENDPOINT (a proxy)."""
    sqs = sqs_client(server.endpoint)
    _, url = new_queue(sqs, f"ours-c{concurrency}")
    counters = drains.counter_dir()
    cfg = {
        "mode": "drain",
        "endpoint": worker_endpoint or server.endpoint,
        "url": url,
        "jobs": jobs,
        "sleep_ms": sleep_ms,
        "counters": str(counters),
        "concurrency": concurrency,
        "logging": logging,
    }
    cli = how == CLI
    args = cli_args(python, concurrency, processes) if cli else [python, SCRIPT]
    slots = concurrency * (processes or 1)
    label = "ours-cli" if cli else "ours"
    label += f"-p{processes}" if processes else ""
    label += f"-c{concurrency}-{sleep_ms}ms-{logging}"
    label += "-proxy" if worker_endpoint else ""
    try:
        prefill(server.endpoint, url, jobs)
        return drains.drain(
            args,
            env=_env(cfg),
            cwd=REPO,
            counters=counters,
            sqs=sqs,
            url=url,
            jobs=jobs,
            timeout=60 + 3 * jobs * sleep_ms / 1000 / slots + jobs / 20,
            self_stopping=not cli,  # the CLI worker stops on the driver's SIGTERM
            label=label,
        )
    finally:
        drop_queue(sqs, url)


@dataclass(frozen=True)
class Enqueue:
    enqueue_rate: float
    enqueue_many_rate: float | None
    enqueue_many_error: str | None


def run_enqueue(
    python: str, server: Server, *, jobs: int, logging: str = "production"
) -> Enqueue:
    sqs = sqs_client(server.endpoint)
    urls = [new_queue(sqs, f"ours-enq-{kind}")[1] for kind in ("loop", "many")]
    counters = drains.counter_dir()
    result = counters / "result.json"
    cfg = {
        "mode": "enqueue",
        "endpoint": server.endpoint,
        "url": urls[0],
        "url_many": urls[1],
        "jobs": jobs,
        "result": str(result),
        "logging": logging,
    }
    log_path = LOGS / f"ours-enqueue-{logging}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log_path.open("wb") as log_file:  # the job_enqueued lines
            done = subprocess.run(
                [python, SCRIPT],
                env=_env(cfg),
                cwd=REPO,
                stdout=log_file,
                stderr=subprocess.PIPE,
                text=True,
                timeout=600,
            )
        if done.returncode != 0:
            raise drains.WorkerFailed(f"enqueue benchmark failed: {tail(done.stderr)}")
        seconds = json.loads(result.read_text())
    finally:
        for url in urls:
            drop_queue(sqs, url)
        shutil.rmtree(counters, ignore_errors=True)
    many = seconds.get("enqueue_many")
    return Enqueue(
        jobs / seconds["enqueue"],
        jobs / many if many else None,
        seconds.get("enqueue_many_error"),
    )


@contextmanager
def _serving(
    python: str, worker_endpoint: str, sqs: SQSClient, idle_wait: int, label: str
) -> Iterator[tuple[dict[str, str], Path]]:
    """An idle worker on three weighted queues; yields ({name: url}, counters dir)."""
    urls = {name: new_queue(sqs, f"ours-{name}")[1] for name, _ in QUEUES}
    counters = drains.counter_dir()
    cfg = {
        "mode": "serve",
        "endpoint": worker_endpoint,
        "idle_wait": idle_wait,
        "counters": str(counters),
        "queues": [[name, urls[name], weight] for name, weight in QUEUES],
        "logging": PRODUCTION,  # the idle figures are targets: as deployed
    }
    log_path = LOGS / f"{label}.log"
    log_path.unlink(missing_ok=True)
    proc = procs.spawn([python, SCRIPT], env=_env(cfg), cwd=REPO, log_path=log_path)
    try:
        yield urls, counters
        if procs.wait(proc, 0) is not None:
            raise drains.WorkerFailed(
                f"{label} exited early: {tail(log_path.read_text(errors='replace'))}"
            )
    finally:
        procs.stop(proc, grace=idle_wait + 15)
        for url in urls.values():
            drop_queue(sqs, url)
        shutil.rmtree(counters, ignore_errors=True)


def _send_probe(sqs: SQSClient, url: str, name: str) -> None:
    body = {"job_type": "probe", "payload": {"queue": name, "sent_at": time.time()}}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))


def _wait_lines(path: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or path.read_bytes().count(b"\n") < count:
        if time.monotonic() > deadline:
            raise drains.WorkerFailed(
                f"probe {count} was not picked up within {timeout:.0f} s"
            )
        time.sleep(0.002)


def run_latency(
    python: str, server: Server, *, idle_wait: int, per_queue: int, rng: random.Random
) -> dict[str, list[float]]:
    """Send-to-handler-start latency in ms per queue.

    Each probe goes, after a random pause, to a worker that has nothing else to do.
    """
    sqs = sqs_client(server.endpoint)
    names = [name for name, _ in QUEUES]
    with _serving(
        python, server.endpoint, sqs, idle_wait, f"ours-latency-{idle_wait}s"
    ) as (urls, counters):
        probes = counters / "probes"
        for name in names:  # warm-up: the worker is up and idle once these ran
            _send_probe(sqs, urls[name], name)
        _wait_lines(probes, len(names), timeout=120)
        for n in range(per_queue * len(names)):
            time.sleep(rng.uniform(0.1, min(idle_wait, 5)))
            name = names[n % len(names)]
            _send_probe(sqs, urls[name], name)
            _wait_lines(probes, len(names) + n + 1, timeout=idle_wait + 30)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for line in probes.read_text().splitlines()[len(names) :]:
            name, seconds = line.split()
            samples[name].append(float(seconds) * 1000)
    return samples


@dataclass(frozen=True)
class IdleRequests:
    receives_per_minute: dict[str, float]  # per logical queue
    requests_per_minute: dict[str, float]  # every action naming the queue
    total_per_minute: float  # every request the worker sent


def run_idle(
    python: str, server: Server, *, idle_wait: int, window: float
) -> IdleRequests:
    """Requests an idle worker sends, counted by a proxy in front of the server."""
    sqs = sqs_client(server.endpoint)
    label = f"ours-idle-{idle_wait}s"
    with (
        CountingProxy(server.endpoint) as proxy,
        _serving(python, proxy.endpoint, sqs, idle_wait, label) as (urls, _),
    ):
        deadline = time.monotonic() + 60
        while not any(action == "ReceiveMessage" for action, _ in proxy.snapshot()):
            if time.monotonic() > deadline:
                raise drains.WorkerFailed(
                    "the idle worker sent no ReceiveMessage within 60 s"
                )
            time.sleep(0.05)
        time.sleep(1.0)  # past start-up
        proxy.reset()
        time.sleep(window)
        counts = proxy.snapshot()
    scale = 60 / window
    by_url = {url: name for name, url in urls.items()}
    receives = {name: 0.0 for name in urls}
    requests = {name: 0.0 for name in urls}
    for (action, url), count in counts.items():
        name = by_url.get(url)
        if name is None:
            continue
        requests[name] += count * scale
        if action == "ReceiveMessage":
            receives[name] += count * scale
    return IdleRequests(receives, requests, sum(counts.values()) * scale)
