"""Results: the figures of a run, medians over the runs, ratios to the references."""

from __future__ import annotations

import math
import os
import platform
import statistics
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from bench.drain import Drain
from bench.ours import IdleRequests
from bench.ours import QUEUES

LOCAL, SLOW = "local", "10 ms"  # DrainSeries.network: the fast server, or the proxy


@dataclass
class DrainSeries:
    worker: str
    slots: int  # in all processes
    sleep_ms: int
    jobs: int
    runs: list[Drain] = field(default_factory=list)
    error: str | None = None
    how: str = ""  # JobWorker, flask sqs-worker, ... (empty for peers)
    logging: str = ""  # the logging configuration the figure used
    network: str = LOCAL  # LOCAL, or SLOW: through the 10 ms +- 2 ms proxy
    processes: int = 1

    @property
    def handler(self) -> str:
        return f"sleep {self.sleep_ms} ms" if self.sleep_ms else "no-op"

    @property
    def name(self) -> str:
        return f"{self.worker} ({self.how})" if self.how else self.worker

    @property
    def layout(self) -> str:
        if self.processes > 1:
            return f"{self.processes} x {self.slots // self.processes}"
        return str(self.slots)


@dataclass
class Results:
    meta: dict[str, Any]
    ceiling: dict[str, list[float]] = field(default_factory=dict)  # msgs/s per run
    drains: list[DrainSeries] = field(default_factory=list)
    enqueue: dict[str, list[float]] = field(default_factory=dict)  # msgs/s per run
    # idle_wait_seconds -> queue -> send-to-start milliseconds
    latency: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    raw_latency: list[float] = field(default_factory=list)  # raw long poll, ms
    idle: dict[int, IdleRequests] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def series(
        self, worker: str, slots: int, sleep_ms: int, jobs: int, **variant: Any
    ) -> DrainSeries:
        """The series of these settings (VARIANT: DrainSeries' optional fields)."""
        wanted = DrainSeries(worker, slots, sleep_ms, jobs, **variant)
        for found in self.drains:
            if _key(found) == _key(wanted):
                return found
        self.drains.append(wanted)
        return wanted

    def find(self, worker: str, sleep_ms: int, **variant: Any) -> DrainSeries | None:
        """The first series of WORKER and SLEEP_MS whose fields match VARIANT."""
        for s in self.drains:
            if (s.worker, s.sleep_ms) == (worker, sleep_ms) and all(
                getattr(s, name) == value for name, value in variant.items()
            ):
                return s
        return None

    def ceiling_median(self, key: str) -> float | None:
        return median(self.ceiling.get(key, []))


def _key(s: DrainSeries) -> tuple[Any, ...]:
    return (s.worker, s.slots, s.sleep_ms, s.how, s.logging, s.network, s.processes)


def rate_of(s: DrainSeries | None) -> float | None:
    return median([r.rate for r in s.runs]) if s is not None else None


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def p99(values: list[float]) -> float | None:
    """Nearest-rank 99th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value is not None and reference else None


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "os": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def drain_summary(results: Results, s: DrainSeries) -> dict[str, Any]:
    rate = median([r.rate for r in s.runs])
    ideal = s.slots * 1000 / s.sleep_ms if s.sleep_ms else None
    prefix = "proxy_" if s.network == SLOW else ""

    def ceiling(key: str) -> float | None:
        return results.ceiling_median(prefix + key)

    return {
        "worker": s.worker,
        "how": s.how,
        "logging": s.logging,
        "network": s.network,
        "processes": s.processes,
        "slots": s.slots,
        "handler": s.handler,
        "jobs": s.jobs,
        "runs": len(s.runs),
        "error": s.error,
        "jobs_per_second": rate,
        "seconds": median([r.seconds for r in s.runs]),
        "startup_seconds": median([r.startup_seconds for r in s.runs]),
        "peak_rss_mb": max((r.peak_rss_mb for r in s.runs), default=None),
        "os_processes": max((r.processes for r in s.runs), default=None),
        "vs_raw_16_threads": None if ideal else ratio(rate, ceiling("drain_16")),
        "vs_raw_1_thread": None if ideal else ratio(rate, ceiling("drain_1")),
        "vs_ideal": ratio(rate, ideal),
    }


def latency_summary(results: Results) -> list[dict[str, Any]]:
    weights = dict(QUEUES)
    raw50, raw99 = median(results.raw_latency), p99(results.raw_latency)
    return [
        {
            "idle_wait_seconds": wait,
            "queue": name,
            "weight": weights[name],
            "samples": len(values),
            "p50_ms": median(values),
            "p99_ms": p99(values),
            "p50_vs_raw_long_poll": ratio(median(values), raw50),
            "p99_vs_raw_long_poll": ratio(p99(values), raw99),
            "p99_vs_idle_wait": ratio(p99(values), wait * 1000),
        }
        for wait, per_queue in results.latency.items()
        for name, values in per_queue.items()
    ]


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def spread(values: list[float], digits: int = 0) -> str:
    """The range over the runs, so the noise shows next to the median."""
    if len(values) < 2:
        return "—"
    return f"{fmt(min(values), digits)}-{fmt(max(values), digits)}"
