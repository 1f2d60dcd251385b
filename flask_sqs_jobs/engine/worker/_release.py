"""Making held messages visible again at once (visibility 0), in batches."""

from __future__ import annotations

import collections
import collections.abc as cabc

import structlog

from ..model import MAX_BATCH_ENTRIES
from ..sqs import SqsQueue
from ._heartbeat import Lease

log = structlog.get_logger(__name__)


def release_leases(leases: cabc.Sequence[Lease], *, even_failed: bool = False) -> int:
    """Set the visibility of each lease's message to 0, in batches per queue.

    Failed leases are skipped (the message may be someone else's by now)
    unless ``even_failed``: a lease this worker abandoned itself is still its own.
    Returns how many messages were released.
    """
    by_queue: dict[SqsQueue, list[str]] = collections.defaultdict(list)
    for lease in leases:
        if even_failed or not lease.failed:
            by_queue[lease.queue].append(lease.receipt_handle)
    released = 0
    for queue, receipts in by_queue.items():
        for start in range(0, len(receipts), MAX_BATCH_ENTRIES):
            chunk = receipts[start : start + MAX_BATCH_ENTRIES]
            errors = queue.change_visibility_many([(r, 0) for r in chunk])
            released += sum(error is None for error in errors)
            for error in errors:
                if error is not None:
                    log.warning(
                        "release_failed",
                        sqs_queue=queue.name,
                        error=f"{error[0]}: {error[1]}",
                    )
    return released
