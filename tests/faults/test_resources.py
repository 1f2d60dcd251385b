"""Resource bounds: one worker through 20,000 jobs keeps flat memory and threads.

The worker process is sampled (``/proc/<pid>/status``: VmRSS and Threads)
while it works; the figures at 25, 50, 75 and 100 % of the jobs go to the
report. The bound is generous (a measurement, not a benchmark): RSS may grow
less than 20 MB from the 25 % mark to the end, and the thread count must not
drift (long-poll threads come and go only while the worker is idle).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import pathlib
import random
import time

import pytest

from .conftest import Report
from .harness import Harness
from .harness import plain_jobs
from .harness import sized
from .harness import stop

RSS_GROWTH_LIMIT_KB = 20 * 1024
CONCURRENCY = 4
MARKS = (0.25, 0.5, 0.75, 1.0)


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float
    done: int
    rss_kb: int
    threads: int


def read_status(pid: int) -> tuple[int, int]:
    """(VmRSS in kB, thread count) of a live process."""
    rss = threads = 0
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


class LineCounter:
    """Counts the lines of a growing file, reading only what was added."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def count(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as file:
                file.seek(self.offset)
                data = file.read()
            self.offset += len(data)
            self.lines += data.count(b"\n")
        return self.lines


@pytest.mark.timeout(1800)
def test_memory_and_threads_stay_flat(harness: Harness, report: Report) -> None:
    if harness.server.kind != "ministack":
        pytest.skip("needs the fast server (MiniStack): run `make faults`")
    count = sized(5000, 20_000)
    queue = harness.queue("resources", visibility_timeout=30)
    jobs = plain_jobs("res", count, (0, 0), random.Random(8))
    chunks = [jobs[i : i + 1000] for i in range(0, count, 1000)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda chunk: harness.send(queue.url, chunk), chunks))
    assert harness.counts(queue.url)[0] == count

    worker = harness.start_worker(
        {"default": queue}, concurrency=CONCURRENCY, direct=True
    )
    # Each job records "start" and "done": two lines.
    lines = LineCounter(harness.record_dir / f"runs-{worker.pid}.jsonl")
    samples: list[Sample] = []
    started = time.monotonic()
    deadline = started + 1500
    while (done := lines.count() // 2) < count:
        assert worker.returncode is None, worker.output()
        assert time.monotonic() < deadline, f"only {done} of {count} jobs ran"
        samples.append(
            Sample(time.monotonic() - started, done, *read_status(worker.pid))
        )
        time.sleep(0.25)  # the sampling period
    samples.append(Sample(time.monotonic() - started, count, *read_status(worker.pid)))
    elapsed = time.monotonic() - started
    assert stop([worker]) == [0]

    at_mark = {
        mark: next(s for s in samples if s.done >= mark * count) for mark in MARKS
    }
    steady = [s for s in samples if s.done >= 0.25 * count]
    rss = {f"{int(m * 100)}%": round(s.rss_kb / 1024, 1) for m, s in at_mark.items()}
    threads = sorted({s.threads for s in steady})
    growth_kb = at_mark[1.0].rss_kb - at_mark[0.25].rss_kb
    report(
        "resource bounds",
        server=harness.server.kind,
        jobs=count,
        concurrency=CONCURRENCY,
        jobs_per_second=round(count / elapsed, 1),
        rss_mb=rss,
        rss_growth_25_to_100_mb=round(growth_kb / 1024, 1),
        rss_max_mb=round(max(s.rss_kb for s in steady) / 1024, 1),
        threads_seen=threads,
        samples=len(samples),
    )
    assert growth_kb < RSS_GROWTH_LIMIT_KB
    assert threads[-1] - threads[0] <= 1, threads
