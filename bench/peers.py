"""Other SQS job runners: each from PyPI, in its own virtualenv, run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench import drain as drains
from bench.ceiling import prefill
from bench.envs import dist_versions
from bench.envs import ensure_venv
from bench.envs import tail
from bench.envs import WORKERS_DIR
from bench.servers import drop_queue
from bench.servers import new_queue
from bench.servers import Server
from bench.servers import sqs_client


@dataclass(frozen=True)
class Peer:
    key: str
    label: str
    requirements: tuple[str, ...]
    dists: tuple[str, ...]
    slots: int
    self_stopping: (
        bool  # stops itself once all jobs ran (else the driver sends SIGTERM)
    )

    @property
    def venv(self) -> str:
        return f"venv-{self.key}"

    def worker_args(self, python: Path, queue: str) -> list[str]:
        if self.key == "sqs-job-worker":
            return [str(python), str(WORKERS_DIR / "sjw_worker.py")]
        if self.key == "dramatiq":
            return [
                str(python),
                "-m",
                "dramatiq",
                "dramatiq_tasks",
                "--processes",
                "2",
                "--threads",
                "8",
                "--path",
                str(WORKERS_DIR),
            ]
        return [
            str(python), "-m", "celery", "-A", "celery_tasks", "worker",
            "--pool", "threads", "--concurrency", "16", "--queues", queue,
            "--loglevel", "WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip

    def prefill_script(self) -> Path | None:
        """A script pre-filling in the peer's own encoding; None for our wire format."""
        return {
            "dramatiq": WORKERS_DIR / "dramatiq_tasks.py",
            "celery": WORKERS_DIR / "celery_tasks.py",
        }.get(self.key)


PEERS = (
    Peer(
        "sqs-job-worker",
        "sqs-job-worker",
        ("sqs-job-worker", "boto3", "orjson"),  # orjson: as our production logging
        ("sqs-job-worker", "boto3", "structlog", "orjson"),
        1,
        True,
    ),
    Peer(
        "dramatiq",
        "dramatiq + dramatiq-sqs (2 proc x 8 threads)",
        ("dramatiq", "dramatiq-sqs"),
        ("dramatiq", "dramatiq-sqs", "boto3"),
        16,
        False,
    ),
    Peer(
        "celery",
        "Celery + SQS transport (16 threads)",
        ("celery[sqs]",),
        ("celery", "kombu", "boto3", "pycurl"),
        16,
        False,
    ),
)


def install(peer: Peer) -> tuple[Path, dict[str, str]]:
    """The peer's python and the versions it runs (RuntimeError when pip fails)."""
    python = ensure_venv(peer.venv, list(peer.requirements))
    return python, dist_versions(python, list(peer.dists))


def run_drain(
    peer: Peer,
    python: Path,
    server: Server,
    *,
    jobs: int,
    sleep_ms: int,
    logging: str = "production",
) -> drains.Drain:
    sqs = sqs_client(server.endpoint)
    name, url = new_queue(sqs, peer.key)
    counters = drains.counter_dir()
    cfg = {
        "endpoint": server.endpoint,
        "url": url,
        "queue": name,
        "jobs": jobs,
        "sleep_ms": sleep_ms,
        "counters": str(counters),
        "logging": logging,  # sqs-job-worker's structlog set-up
    }
    env = {
        **os.environ,
        "BENCH_CONFIG": json.dumps(cfg),
        "PYTHONPATH": str(WORKERS_DIR),
    }
    try:
        script = peer.prefill_script()
        if script is None:
            prefill(server.endpoint, url, jobs)
        else:
            done = subprocess.run(
                [str(python), str(script)],
                env=env,
                cwd=WORKERS_DIR,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                raise drains.WorkerFailed(
                    f"{peer.key} pre-fill failed: {tail(done.stderr)}"
                )
        return drains.drain(
            peer.worker_args(python, name),
            env=env,
            cwd=WORKERS_DIR,
            counters=counters,
            sqs=sqs,
            url=url,
            jobs=jobs,
            timeout=drain_timeout(jobs, sleep_ms, peer.slots),
            self_stopping=peer.self_stopping,
            label=f"{peer.key}-{sleep_ms}ms-{logging}",
        )
    finally:
        drop_queue(sqs, url)


def drain_timeout(jobs: int, sleep_ms: int, slots: int) -> float:
    """Generous: a minute, plus 3x the ideal sleeping time, plus 1/20 s per job."""
    return 60 + 3 * jobs * sleep_ms / 1000 / slots + jobs / 20
