"""What a worker counts as it settles messages: outcomes, and messages that are
not runnable jobs.

:meth:`JobWorker.stats <flask_sqs_jobs.engine.JobWorker.stats>` reads the
outcomes; the Prometheus metrics read the rest at each scrape. Labels come
from the worker's own vocabulary only (logical queue names, outcome values,
the fixed :data:`MALFORMED_REASONS`): never from a message, whose job type and
text are untrusted and unbounded.
"""

from __future__ import annotations

import collections
import threading

from ._outcome import Outcome

#: Why a message was counted as malformed (the ``reason`` label of
#: ``sqs_jobs_malformed_total``). Each but ``bad_job_id`` means the message
#: was deleted unrun; a job with a bad job id still runs, under its MessageId.
MALFORMED_REASONS = frozenset(
    {
        "not_text",
        "not_json",
        "too_deep",
        "not_object",
        "bad_job_type",
        "bad_payload",
        "bad_job_id",
        "bad_pointer",
    }
)


class WorkerCounts:
    """Counters shared by a worker's settling threads (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: collections.Counter[Outcome] = collections.Counter()
        self._malformed: collections.Counter[tuple[str, str]] = collections.Counter()
        self._unknown: collections.Counter[str] = collections.Counter()

    def outcome(self, outcome: Outcome) -> None:
        with self._lock:
            self._outcomes[outcome] += 1

    def malformed(self, queue: str, reason: str) -> None:
        """Count a malformed message of ``queue``; ``reason`` is one of
        :data:`MALFORMED_REASONS`."""
        with self._lock:
            self._malformed[queue, reason] += 1

    def unknown_job_type(self, queue: str) -> None:
        with self._lock:
            self._unknown[queue] += 1

    def outcomes(self) -> dict[str, int]:
        """Jobs settled per outcome, every outcome listed (0 when none)."""
        with self._lock:
            return {outcome.value: self._outcomes[outcome] for outcome in Outcome}

    def malformed_counts(self) -> dict[tuple[str, str], int]:
        """``(queue, reason)`` -> malformed messages."""
        with self._lock:
            return dict(self._malformed)

    def unknown_job_type_counts(self) -> dict[str, int]:
        """Queue -> messages of a job type this worker has no handler for."""
        with self._lock:
            return dict(self._unknown)
