"""Releasing held messages: visible again at once (visibility 0), in batches.

In this package *release* means only that; an idempotency key is
*relinquished*.
"""

from __future__ import annotations

import collections
import collections.abc as cabc

import structlog

from ..model import MAX_BATCH_ENTRIES
from ..sqs import CallFailed
from ..sqs import SqsQueue
from ._heartbeat import Lease

log = structlog.get_logger(__name__)


def release_leases(
    leases: cabc.Sequence[Lease],
    *,
    even_failed: bool = False,
    on_error: cabc.Callable[[str, BaseException], None] | None = None,
) -> int:
    """Set the visibility of each lease's message to 0, in batches per queue.

    Failed leases are skipped (the message may be someone else's by now)
    unless ``even_failed``: a lease this worker abandoned itself is still its own.
    Each failed release is logged, and handed to ``on_error`` with its
    logical queue's name. Returns how many messages were released.
    """
    by_queue: dict[SqsQueue, list[Lease]] = collections.defaultdict(list)
    for lease in leases:
        if even_failed or not lease.failed:
            by_queue[lease.queue].append(lease)
    released = 0
    for queue, queued in by_queue.items():
        for start in range(0, len(queued), MAX_BATCH_ENTRIES):
            chunk = queued[start : start + MAX_BATCH_ENTRIES]
            errors = queue.change_visibility_many(
                [(x.receipt_handle, 0) for x in chunk]
            )
            for lease, error in zip(chunk, errors, strict=True):
                if error is None:
                    released += 1
                    continue
                log.warning(
                    "release_failed",
                    sqs_queue=queue.name,
                    error=f"{error[0]}: {error[1]}",
                )
                if on_error is not None:
                    on_error(
                        lease.queue_name, CallFailed("ChangeMessageVisibility", error)
                    )
    return released
