"""A process-wide count of failed job-store writes, for ``sqs_jobs_store_errors_total``.

Store writes happen off the job's path (a writer thread, a worker service),
where no hook reaches the worker's metrics; they count here instead, and
:class:`~flask_sqs_jobs.engine.PrometheusMetrics` reads the counts at each
scrape.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_counts: dict[str, int] = {}


def count_store_error(part: str, n: int = 1) -> None:
    """Count ``n`` failed writes of the store's ``part`` (``job_records``, ...)."""
    with _lock:
        _counts[part] = _counts.get(part, 0) + n


def store_error_counts() -> dict[str, int]:
    """The failed writes so far, by part."""
    with _lock:
        return dict(_counts)
