"""The engine's targets (measured, met or missed) and the 10 ms per call table."""

from __future__ import annotations

from typing import Any

from bench.ours import CLI
from bench.ours import EMBEDDED
from bench.ours import OURS
from bench.ours import PRODUCTION
from bench.ours import QUIET
from bench.report import DrainSeries
from bench.report import fmt
from bench.report import fmt_ratio
from bench.report import LOCAL
from bench.report import median
from bench.report import p99
from bench.report import rate_of
from bench.report import ratio
from bench.report import Results
from bench.report import SLOW

DRAMATIQ = "dramatiq + dramatiq-sqs (2 proc x 8 threads)"
PROCESSES = 2
CLI_PROCESSES = f"{CLI} --processes {PROCESSES}"


def ours(
    results: Results,
    how: str,
    sleep_ms: int,
    *,
    network: str = LOCAL,
    slots: int = 16,
) -> DrainSeries | None:
    """Our series with production logging, else the same one with INFO dropped."""
    found = [
        s
        for logging in (PRODUCTION, QUIET)
        if (
            s := results.find(
                OURS, sleep_ms, how=how, network=network, logging=logging, slots=slots
            )
        )
    ]
    measured = [s for s in found if s.runs]
    return (measured or found or [None])[0]


def _row(
    target: str, value: float | None, limit: float, detail: str, logging: str
) -> dict[str, Any]:
    higher = not target.startswith(("idle", "peak", "ReceiveMessage"))
    met = None if value is None else (value >= limit if higher else value <= limit)
    return {
        "target": target,
        "measured": value,
        "limit": limit,
        "detail": detail,
        "logging": logging,
        "status": "not measured" if met is None else "met" if met else "missed",
    }


def _drain_row(
    target: str,
    s: DrainSeries | None,
    reference: float | None,
    limit: float,
    name: str,
) -> dict[str, Any]:
    rate = rate_of(s)
    if s is not None and not s.runs:
        detail = s.error or "failed"
    else:
        detail = f"{fmt(rate, 1)} vs {fmt(reference, 1)} jobs/s ({name})"
    return _row(target, ratio(rate, reference), limit, detail, s.logging if s else "")


def rows(results: Results) -> list[dict[str, Any]]:
    c = results.ceiling_median
    dramatiq = rate_of(results.find(DRAMATIQ, 0))
    raw_16 = c("proxy_drain_16")
    drains = [
        (
            "no-op, JobWorker, 16 slots vs raw 1-thread loop",
            ours(results, EMBEDDED, 0),
            c("drain_1"),
            0.40,
            "raw 1 thread",
        ),
        (
            "no-op, JobWorker, 16 slots vs dramatiq-sqs default",
            ours(results, EMBEDDED, 0),
            dramatiq,
            1.0,
            "dramatiq 2 x 8",
        ),
        (
            f"no-op, {CLI_PROCESSES} x 16 vs dramatiq-sqs default",
            ours(results, CLI_PROCESSES, 0, slots=16 * PROCESSES),
            dramatiq,
            1.5,
            "dramatiq 2 x 8",
        ),
    ]
    for how in (EMBEDDED, CLI):
        drains += [
            (
                f"10 ms per call: no-op, {how}, 16 slots vs raw 16 threads",
                ours(results, how, 0, network=SLOW),
                raw_16,
                0.80,
                "raw, same proxy",
            ),
            (
                f"10 ms per call: 50 ms, {how}, 16 slots vs ideal",
                ours(results, how, 50, network=SLOW),
                320.0,
                0.85,
                "ideal",
            ),
            (
                f"50 ms, {how}, 16 slots vs ideal",
                ours(results, how, 50),
                320.0,
                0.85,
                "ideal",
            ),
        ]
    found = [_drain_row(*row) for row in drains]
    add = found.append
    default = results.meta.get("logging_default", "")
    for wait, per_queue in results.latency.items():
        p99s = [x for v in per_queue.values() if (x := p99(v)) is not None]
        worst = max(p99s, default=None)
        add(
            _row(
                f"idle pick-up p99 ms, idle_wait {wait} s (worst queue)",
                worst,
                50,
                f"{fmt(worst, 1)} ms; the server's floor (raw long poll) p99 "
                f"{fmt(p99(results.raw_latency), 1)} ms",
                PRODUCTION,
            )
        )
    idle = results.idle.get(20)
    if idle is not None:
        most = max(idle.receives_per_minute.values(), default=None)
        add(
            _row(
                "ReceiveMessage per idle minute per queue, idle_wait 20 s",
                most,
                3.5,
                f"{fmt(most, 1)} on the busiest queue",
                PRODUCTION,
            )
        )
    rss = [
        r.peak_rss_mb
        for s in results.drains
        if s.worker == OURS and s.logging == PRODUCTION
        for r in s.runs
    ]
    peak = max(rss, default=None)
    add(
        _row(
            "peak RSS MB per process, every flask-sqs-jobs drain",
            peak,
            70,
            f"{fmt(peak, 1)} MB",
            PRODUCTION,
        )
    )
    for key, ref, limit in (
        ("enqueue", "send_loop", 0.90),
        ("enqueue_many", "send_batch", 0.80),
    ):
        rate = median(results.enqueue.get(key, []))
        add(
            _row(
                f"`{key}` vs raw {ref.replace('_', ' ')}",
                ratio(rate, c(ref)),
                limit,
                f"{fmt(rate)} vs {fmt(c(ref))} msgs/s",
                default,
            )
        )
    return found


def table(results: Results) -> list[str]:
    lines = [
        "## Targets",
        "",
        "Ratios to references measured in the same run (except the absolute ms, "
        "request and MB figures). The targets hold with production logging; a row "
        "marked quiet was measured with INFO dropped (`--logging quiet`).",
        "",
        "| target | limit | measured | detail | logging | status |",
        "| --- | ---: | ---: | --- | --- | --- |",
    ]
    for row in rows(results):
        absolute = row["target"].startswith(("idle", "peak", "ReceiveMessage"))
        sign = "<=" if absolute else ">="
        measured = fmt(row["measured"], 1) if absolute else fmt_ratio(row["measured"])
        lines.append(
            f"| {row['target']} | {sign} {row['limit']} | {measured} "
            f"| {row['detail']} | {row['logging'] or '—'} | {row['status']} |"
        )
    return [*lines, ""]


def proxy_table(results: Results) -> list[str]:
    """Figures through the proxy that adds 10 ms +- 2 ms before every request."""
    c = results.ceiling_median
    sixteen, one = c("proxy_drain_16"), c("proxy_drain_1")
    if sixteen is None and one is None:
        return []
    lines = [
        "## With 10 ms per call (AWS-like): through a proxy adding 10 ms +- 2 ms",
        "",
        "Every request waits 10 ms +- 2 ms (uniform, seeded) in a proxy before it "
        "reaches the same server. No-op drains against the raw 16-thread loop "
        "through the same proxy; 50 ms drains against the ideal, slots x 20 jobs/s.",
        "",
        "| figure | logging | jobs/s | ratio | reference |",
        "| --- | --- | ---: | ---: | --- |",
        f"| raw boto3, 16 threads | — | {fmt(sixteen, 1)} | 1.00 "
        "| reference for no-op |",
        f"| raw boto3, 1 thread | — | {fmt(one, 1)} "
        f"| {fmt_ratio(ratio(one, sixteen))} | raw 16 threads |",
    ]
    for s in results.drains:
        if s.network != SLOW:
            continue
        if not s.runs:
            lines.append(
                f"| {s.name}, {s.layout} slots, {s.handler} | {s.logging} "
                f"| failed: {s.error} | | |"
            )
            continue
        rate = rate_of(s)
        ideal = s.slots * 1000 / s.sleep_ms if s.sleep_ms else None
        versus = ratio(rate, ideal) if ideal else ratio(rate, sixteen)
        lines.append(
            f"| {s.name}, {s.layout} slots, {s.handler} | {s.logging} "
            f"| {fmt(rate, 1)} | {fmt_ratio(versus)} "
            f"| {'ideal' if ideal else 'raw 16 threads'} |"
        )
    return [*lines, ""]
