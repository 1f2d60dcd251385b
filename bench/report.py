"""Results: medians over the runs, ratios against this run's ceiling, JSON, Markdown."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from bench.drain import Drain
from bench.ours import IdleRequests
from bench.ours import QUEUES


@dataclass
class DrainSeries:
    worker: str
    slots: int
    sleep_ms: int
    jobs: int
    runs: list[Drain] = field(default_factory=list)
    error: str | None = None

    @property
    def handler(self) -> str:
        return f"sleep {self.sleep_ms} ms" if self.sleep_ms else "no-op"


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

    def series(self, worker: str, slots: int, sleep_ms: int, jobs: int) -> DrainSeries:
        for found in self.drains:
            if (found.worker, found.slots, found.sleep_ms) == (worker, slots, sleep_ms):
                return found
        created = DrainSeries(worker, slots, sleep_ms, jobs)
        self.drains.append(created)
        return created

    def ceiling_median(self, key: str) -> float | None:
        return median(self.ceiling.get(key, []))


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


def write(results: Results, out_dir: Path) -> tuple[Path, Path]:
    load = [round(x, 2) for x in os.getloadavg()]
    results.meta["machine"]["load_average_at_end"] = load
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "latest.json", out_dir / "latest.md"
    json_path.write_text(json.dumps(to_json(results), indent=2) + "\n")
    md_path.write_text(markdown(results))
    return json_path, md_path


def drain_summary(results: Results, s: DrainSeries) -> dict[str, Any]:
    rate = median([r.rate for r in s.runs])
    ideal = s.slots * 1000 / s.sleep_ms if s.sleep_ms else None
    ceiling = results.ceiling_median
    return {
        "worker": s.worker,
        "slots": s.slots,
        "handler": s.handler,
        "jobs": s.jobs,
        "runs": len(s.runs),
        "error": s.error,
        "jobs_per_second": rate,
        "seconds": median([r.seconds for r in s.runs]),
        "startup_seconds": median([r.startup_seconds for r in s.runs]),
        "peak_rss_mb": max((r.peak_rss_mb for r in s.runs), default=None),
        "processes": max((r.processes for r in s.runs), default=None),
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


def to_json(results: Results) -> dict[str, Any]:
    data = asdict(results)
    enqueue = {key: median(values) for key, values in results.enqueue.items()}
    data["summary"] = {
        "ceiling": {key: median(values) for key, values in results.ceiling.items()},
        "drains": [drain_summary(results, s) for s in results.drains],
        "enqueue": enqueue,
        "enqueue_vs_raw_send_loop": ratio(
            enqueue.get("enqueue"), results.ceiling_median("send_loop")
        ),
        "enqueue_many_vs_raw_send_batch": ratio(
            enqueue.get("enqueue_many"), results.ceiling_median("send_batch")
        ),
        "raw_long_poll_latency_ms": {
            "samples": len(results.raw_latency),
            "p50": median(results.raw_latency),
            "p99": p99(results.raw_latency),
        },
        "latency": latency_summary(results),
    }
    return data


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def markdown(results: Results) -> str:
    meta, m = results.meta, results.meta["machine"]
    versions = "; ".join(
        f"{env}: " + ", ".join(f"{name} {version}" for name, version in dists.items())
        for env, dists in meta["versions"].items()
    )
    lines = [
        "# flask-sqs-jobs benchmark",
        "",
        f"- Date: {meta['date']}",
        f"- Reproduce: `{meta['command']}` from the repository root",
        f"- Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['os']}",
        f"- Load average: {m['load_average_at_start']} at start, "
        f"{m.get('load_average_at_end')} at end",
        f"- Server: {meta['server']}",
        f"- Versions: {versions}",
        f"- Medians of {meta['repeat']} run(s); every drain is {meta['jobs']:,} jobs "
        "pre-filled on a fresh queue.",
        "",
        *ceiling_table(results),
        *drain_table(results),
        *enqueue_table(results),
        *latency_table(results),
        *idle_table(results),
        "## Notes",
        "",
        *[f"- {text}" for text in [*meta["method"], *results.notes]],
    ]
    return "\n".join(lines) + "\n"


def spread(values: list[float], digits: int = 0) -> str:
    """The range over the runs, so the noise shows next to the median."""
    if len(values) < 2:
        return "—"
    return f"{fmt(min(values), digits)}-{fmt(max(values), digits)}"


def ceiling_table(results: Results) -> list[str]:
    c = results.ceiling
    one, sixteen = results.ceiling_median("drain_1"), results.ceiling_median("drain_16")
    loop = results.ceiling_median("send_loop")
    batch = results.ceiling_median("send_batch")
    return [
        "## Ceiling: raw boto3 on the same server, in the same run",
        "",
        "| figure | msgs/s | range | ratio |",
        "| --- | ---: | ---: | --- |",
        "| drain, 1 thread: ReceiveMessage(10) + DeleteMessageBatch "
        f"| {fmt(one)} | {spread(c.get('drain_1', []))} "
        "| 1.00 (reference for no-op drains) |",
        f"| drain, 16 threads | {fmt(sixteen)} | {spread(c.get('drain_16', []))} "
        f"| {fmt_ratio(ratio(sixteen, one))} of 1 thread "
        "(reference for no-op drains) |",
        f"| SendMessage loop | {fmt(loop)} | {spread(c.get('send_loop', []))} "
        "| 1.00 (reference for `enqueue`) |",
        f"| SendMessageBatch, 10 per call | {fmt(batch)} "
        f"| {spread(c.get('send_batch', []))} "
        f"| {fmt_ratio(ratio(batch, loop))} of the loop "
        "(reference for `enqueue_many`) |",
        "",
    ]


def drain_table(results: Results) -> list[str]:
    lines = [
        "## Draining a pre-filled queue",
        "",
        "No-op drains against the raw drains above; 50 ms drains against the ideal "
        "rate, slots x 20 jobs/s. Peak RSS is that of the largest process.",
        "",
        "| worker | slots | handler | wall s | jobs/s | range | vs raw 16 threads "
        "| vs raw 1 thread | vs ideal | start-up s | peak RSS MB | processes |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for s in results.drains:
        row = drain_summary(results, s)
        if not s.runs:
            lines.append(
                f"| {s.worker} | {s.slots} | {s.handler} | failed: {s.error} "
                "| | | | | | | | |"
            )
            continue
        lines.append(
            f"| {s.worker} | {s.slots} | {s.handler} | {fmt(row['seconds'], 2)} "
            f"| {fmt(row['jobs_per_second'], 1)} "
            f"| {spread([r.rate for r in s.runs], 1)} "
            f"| {fmt_ratio(row['vs_raw_16_threads'])} "
            f"| {fmt_ratio(row['vs_raw_1_thread'])} | {fmt_ratio(row['vs_ideal'])} "
            f"| {fmt(row['startup_seconds'], 2)} | {fmt(row['peak_rss_mb'], 1)} "
            f"| {row['processes']} |"
        )
    return [*lines, ""]


def enqueue_table(results: Results) -> list[str]:
    lines = [
        "## Enqueue: flask-sqs-jobs, single thread",
        "",
        "| method | msgs/s | range | vs raw baseline |",
        "| --- | ---: | ---: | --- |",
    ]
    for key, reference, name in (
        ("enqueue", "send_loop", "SendMessage loop"),
        ("enqueue_many", "send_batch", "SendMessageBatch"),
    ):
        values = results.enqueue.get(key, [])
        rate = median(values)
        versus = fmt_ratio(ratio(rate, results.ceiling_median(reference)))
        shown = fmt(rate) if rate is not None else "not available"
        lines.append(
            f"| `{key}` | {shown} | {spread(values)} | {versus} of raw {name} |"
        )
    return [*lines, ""]


def latency_table(results: Results) -> list[str]:
    lines = [
        "## Idle pick-up latency: flask-sqs-jobs, 3 queues of weights 5, 2, 1",
        "",
        "From SendMessage to handler start, each probe sent after a random pause to a "
        "worker with nothing else to do. The reference is a raw boto3 receiver "
        "long-polling one queue on the same server, probed the same way: the "
        "server's own floor.",
        "",
        "| idle_wait_seconds | queue (weight) | samples | p50 ms | p99 ms "
        "| p50 vs raw | p99 vs raw | p99 vs idle_wait |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    raw = results.raw_latency
    if raw:
        lines.append(
            f"| — | raw long poll, 1 queue | {len(raw)} | {fmt(median(raw), 1)} "
            f"| {fmt(p99(raw), 1)} | 1.00 | 1.00 | — |"
        )
    for row in latency_summary(results):
        lines.append(
            f"| {row['idle_wait_seconds']} | {row['queue']} ({row['weight']}) "
            f"| {row['samples']} | {fmt(row['p50_ms'], 1)} | {fmt(row['p99_ms'], 1)} "
            f"| {fmt_ratio(row['p50_vs_raw_long_poll'])} "
            f"| {fmt_ratio(row['p99_vs_raw_long_poll'])} "
            f"| {fmt_ratio(row['p99_vs_idle_wait'])} |"
        )
    return [*lines, ""]


def idle_table(results: Results) -> list[str]:
    weights = dict(QUEUES)
    lines = [
        "## Requests per idle minute: flask-sqs-jobs, counted by a proxy",
        "",
        "The reference is one long poll per idle_wait_seconds, 60 / idle_wait "
        "ReceiveMessage calls a minute.",
        "",
        "| idle_wait_seconds | queue (weight) | ReceiveMessage / min "
        "| all requests / min | receives vs reference |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for wait, idle in results.idle.items():
        reference = 60 / wait
        for name, receives in idle.receives_per_minute.items():
            lines.append(
                f"| {wait} | {name} ({weights[name]}) | {fmt(receives, 1)} "
                f"| {fmt(idle.requests_per_minute[name], 1)} "
                f"| {fmt_ratio(ratio(receives, reference))} |"
            )
        total = sum(idle.receives_per_minute.values())
        lines.append(
            f"| {wait} | all queues | {fmt(total, 1)} "
            f"| {fmt(idle.total_per_minute, 1)} "
            f"| {fmt_ratio(ratio(total, reference))} |"
        )
    return [*lines, ""]
