"""latest.json and latest.md from the results of a run."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import targets
from bench.ours import EMBEDDED
from bench.ours import OURS
from bench.ours import PRODUCTION
from bench.ours import QUEUES
from bench.ours import QUIET
from bench.report import drain_summary
from bench.report import DrainSeries
from bench.report import fmt
from bench.report import fmt_ratio
from bench.report import latency_summary
from bench.report import LOCAL
from bench.report import median
from bench.report import p99
from bench.report import rate_of
from bench.report import ratio
from bench.report import Results
from bench.report import spread


def write(results: Results, out_dir: Path) -> tuple[Path, Path]:
    load = [round(x, 2) for x in os.getloadavg()]
    results.meta["machine"]["load_average_at_end"] = load
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "latest.json", out_dir / "latest.md"
    json_path.write_text(json.dumps(to_json(results), indent=2) + "\n")
    md_path.write_text(markdown(results))
    return json_path, md_path


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
        "targets": targets.rows(results),
    }
    return data


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
        f"- Logging: {meta.get('logging', 'not recorded')}",
        "",
        *targets.table(results),
        *ceiling_table(results),
        *drain_table(results),
        *logging_table(results),
        *targets.proxy_table(results),
        *enqueue_table(results),
        *latency_table(results),
        *idle_table(results),
        "## Notes",
        "",
        *[f"- {text}" for text in [*meta["method"], *results.notes]],
    ]
    return "\n".join(lines) + "\n"


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
        "rate, slots x 20 jobs/s. Peak RSS is that of the largest process; the "
        "logging column says which configuration the worker ran with.",
        "",
        *DRAIN_HEAD,
    ]
    for s in results.drains:
        if s.network == LOCAL:
            lines.append(drain_row(results, s))
    return [*lines, ""]


DRAIN_HEAD = [
    "| worker | slots | handler | logging | wall s | jobs/s | range "
    "| vs raw 16 threads | vs raw 1 thread | vs ideal | start-up s | peak RSS MB "
    "| processes |",
    "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
    "| ---: | ---: |",
]


def drain_row(results: Results, s: DrainSeries) -> str:
    head = f"| {s.name} | {s.layout} | {s.handler} | {s.logging or '—'}"
    if not s.runs:
        error = s.error or "no run"
        why = error if error.startswith("not available") else f"failed: {error}"
        return f"{head} | {why} | | | | | | | | |"
    row = drain_summary(results, s)
    return (
        f"{head} | {fmt(row['seconds'], 2)} "
        f"| {fmt(row['jobs_per_second'], 1)} "
        f"| {spread([r.rate for r in s.runs], 1)} "
        f"| {fmt_ratio(row['vs_raw_16_threads'])} "
        f"| {fmt_ratio(row['vs_raw_1_thread'])} | {fmt_ratio(row['vs_ideal'])} "
        f"| {fmt(row['startup_seconds'], 2)} | {fmt(row['peak_rss_mb'], 1)} "
        f"| {row['os_processes']} |"
    )


def logging_table(results: Results) -> list[str]:
    """The cost of production logging: the same no-op drain with INFO on and off."""
    found = [
        s
        for s in results.drains
        if s.worker == OURS
        and s.how == EMBEDDED
        and s.slots == 16
        and s.sleep_ms == 0
        and s.network == LOCAL
    ]
    by = {s.logging: s for s in found}
    production, quiet = by.get(PRODUCTION), by.get(QUIET)
    if production is None or quiet is None:
        return []
    cost = ratio(rate_of(production), rate_of(quiet))
    return [
        "## The cost of production logging: JobWorker, 16 slots, no-op",
        "",
        f"Production logging runs at {fmt_ratio(cost)} of the rate with INFO dropped.",
        "",
        *DRAIN_HEAD,
        drain_row(results, production),
        drain_row(results, quiet),
        "",
    ]


def enqueue_table(results: Results) -> list[str]:
    lines = [
        "## Enqueue: flask-sqs-jobs, single thread, "
        f"{results.meta.get('logging_default', '?')} logging",
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
        "## Idle pick-up latency: flask-sqs-jobs, 3 queues of weights 5, 2, 1, "
        "production logging",
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
        "## Requests per idle minute: flask-sqs-jobs, counted by a proxy, "
        "production logging",
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
