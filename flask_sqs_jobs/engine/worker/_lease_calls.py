"""The heartbeat's arithmetic and calls: when to wake, and the extension requests."""

from __future__ import annotations

import collections
import collections.abc as cabc
import time

from ..model import MAX_BATCH_ENTRIES
from ..sqs import CallError
from ..sqs import SqsQueue
from ._lease import Lease


def seconds_until_next(
    leases: cabc.Collection[Lease], batch_window: float
) -> float | None:
    """How long the heartbeat may sleep: until the first due extension,
    deadline or window end; None: no lease."""
    if not leases:
        return None
    now = time.monotonic()
    wake = min(
        min(
            (
                lease.next_due - lease.interval * batch_window
                for lease in leases
                if not lease.in_flight  # it wakes the thread when done
            ),
            default=float("inf"),
        ),
        min(
            (lease.job_deadline for lease in leases if lease.job_deadline is not None),
            default=float("inf"),
        ),
        min(lease.window_closes_at - 1 for lease in leases),
    )
    return None if wake == float("inf") else max(0.0, wake - now)


def extend_visibility(due: list[Lease]) -> dict[Lease, tuple[float, CallError]]:
    """Send the extensions of ``due``, ten per request and queue; return each
    one's send time and error."""
    by_queue: dict[SqsQueue, list[Lease]] = collections.defaultdict(list)
    for lease in due:
        by_queue[lease.queue].append(lease)
    results: dict[Lease, tuple[float, CallError]] = {}
    for queue, leases in by_queue.items():
        for start in range(0, len(leases), MAX_BATCH_ENTRIES):
            chunk = leases[start : start + MAX_BATCH_ENTRIES]
            sent_at = time.monotonic()
            errors = queue.change_visibility_many(
                [
                    (
                        lease.receipt_handle,
                        # Never 0 (visible at once): the heartbeat left a second.
                        max(1, lease.cap_visibility(lease.visibility_timeout)),
                    )
                    for lease in chunk
                ]
            )
            for lease, error in zip(chunk, errors, strict=True):
                results[lease] = (sent_at, error)
    return results
