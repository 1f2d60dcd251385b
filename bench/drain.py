"""Timing a worker subprocess that drains a pre-filled queue.

Handlers (bench/workers/_common.py) append their start time to ``started`` and one
byte to ``done`` in a per-run directory, which works across threads and processes
alike. A drain lasts from the first handler start to the moment every handler has
finished and the queue shows no visible and no in-flight message; start-up (spawn to
first handler start) is reported apart.
"""

from __future__ import annotations

import shutil
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench import procs
from bench.envs import BENCH_DIR
from bench.envs import tail
from bench.servers import LOGS
from bench.servers import queue_depth
from bench.servers import SQSClient

RUNS = BENCH_DIR / "runs"


@dataclass(frozen=True)
class Drain:
    jobs: int
    seconds: float
    startup_seconds: float
    peak_rss_mb: float  # the largest process of the worker's tree
    processes: int
    handler_runs: int

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


class WorkerFailed(RuntimeError):
    pass


def counter_dir() -> Path:
    path = RUNS / uuid.uuid4().hex[:12]
    path.mkdir(parents=True)
    return path


def drain(
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    counters: Path,
    sqs: SQSClient,
    url: str,
    jobs: int,
    timeout: float,
    self_stopping: bool,
    label: str,
) -> Drain:
    """Run ARGS until JOBS ran and URL is empty; SIGTERM unless SELF_STOPPING."""
    log_path = LOGS / f"{label}.log"
    log_path.unlink(missing_ok=True)
    done = counters / "done"
    spawned_at = time.time()
    proc = procs.spawn(args, env=env, cwd=cwd, log_path=log_path)
    rss = (0.0, 0)
    try:
        deadline = time.monotonic() + timeout
        next_look = 0.0
        while _size(done) < jobs:
            code = procs.wait(proc, 0)
            if code is not None:
                raise WorkerFailed(f"{label} exited with {code}: {_log_tail(log_path)}")
            if time.monotonic() > deadline:
                progress = f"{_size(done)}/{jobs} jobs done"
                raise WorkerFailed(
                    f"{label} timed out after {timeout:.0f} s, {progress}"
                )
            if time.monotonic() > next_look:  # the high-water mark only grows
                rss = _higher(rss, procs.peak_rss_mb(proc))
                next_look = time.monotonic() + 0.5
            time.sleep(0.002)
        rss = _higher(rss, procs.peak_rss_mb(proc))
        while queue_depth(sqs, url) != (0, 0):
            if time.monotonic() > deadline:
                depth = queue_depth(sqs, url)
                raise WorkerFailed(f"{label}: all jobs ran but the queue holds {depth}")
            time.sleep(0.005)
        finished_at = time.time()
        if self_stopping and procs.wait(proc, 60) is None:
            raise WorkerFailed(f"{label} did not stop within 60 s of request_stop()")
    finally:
        procs.stop(proc, grace=30)
    started = (counters / "started").read_bytes()
    first = min(struct.unpack(f"<{len(started) // 8}d", started))
    runs = _size(done)
    shutil.rmtree(counters, ignore_errors=True)
    return Drain(jobs, finished_at - first, first - spawned_at, rss[0], rss[1], runs)


def _higher(a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
    return max(a[0], b[0]), max(a[1], b[1])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _log_tail(path: Path) -> str:
    try:
        return tail(path.read_text(errors="replace"))
    except OSError:
        return "(no log)"
