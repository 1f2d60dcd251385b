"""One SQS event: each record run and settled as the worker does, then reported.

Each record becomes a :class:`MappingDelivery` and goes through the worker's
own :class:`~flask_sqs_jobs.engine.worker.JobProcessing`. The one difference
is who deletes: a record whose message the settle phase would delete (done,
dead-lettered with its reason, deferred, not a job) is left to the event
source mapping, which deletes what the response does not report; every other
record (a retry, with its visibility set as the worker sets it; a lost lease;
an unknown job type) is reported in ``batchItemFailures``.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import time
import typing as t

import structlog

from ..engine import SqsQueue
from ..engine.model import is_finite_number
from ..engine.sqs import CallError
from ..engine.worker import Delivery
from ..engine.worker import Heartbeat
from ..engine.worker import JobProcessing
from ..engine.worker import Lease
from ..engine.worker import release_leases
from ._records import batch_item_failures
from ._records import group_of
from ._records import message_of
from ._sources import EventSources

log = structlog.get_logger(__name__)

#: A job starts only with at least this long left of the invocation (seconds).
DEFAULT_MIN_REMAINING_SECONDS = 5.0
#: Seconds kept for the settle phase and the response once a job's capped
#: runtime is over.
SETTLE_RESERVE_SECONDS = 0.5
#: The longest batching window a mapping may have: a record may have been
#: received that long before the invocation, so its 12 hours count from then.
MAX_BATCHING_WINDOW_SECONDS = 300


class LambdaContext(t.Protocol):
    """What the handler reads of Lambda's context object."""

    def get_remaining_time_in_millis(self) -> int: ...


class MappingDelivery(Delivery):
    """A record of an SQS event: deleted by the event source mapping, not here.

    The settle phase's delete only notes that the record is done; the handler
    then leaves it out of ``batchItemFailures`` and the mapping deletes it.
    """

    __slots__ = ("deleted",)

    def __init__(
        self,
        queue_name: str,
        queue: SqsQueue,
        record: cabc.Mapping[str, t.Any],
        lease: Lease,
    ) -> None:
        super().__init__(queue_name, queue, message_of(record), lease)
        self.deleted = False

    def delete(self, *, linger: float = 0.0) -> CallError:
        self.deleted = True
        return None


def check_min_remaining(value: object) -> float:
    """``min_remaining_seconds``, checked: a finite number of seconds >= 1."""
    if not is_finite_number(value) or t.cast(float, value) < 1:
        raise ValueError(
            "min_remaining_seconds must be a finite number of seconds >= 1 (the"
            " time a job needs left of the invocation to be started); got"
            f" {value!r}"
        )
    return float(t.cast(float, value))


@dataclasses.dataclass
class BatchRunner:
    """Run one event's records in order, and say which must come back.

    One per execution environment (built on the first event), called once
    per invocation, on the invocation's thread. The heartbeat extends every
    record's visibility from the start of the invocation until its record is
    settled, as the worker does for every message it holds.
    """

    processing: JobProcessing
    heartbeat: Heartbeat
    sources: EventSources
    min_remaining_seconds: float = DEFAULT_MIN_REMAINING_SECONDS

    def run(
        self, records: cabc.Sequence[cabc.Mapping[str, t.Any]], context: LambdaContext
    ) -> dict[str, list[dict[str, str]]]:
        """Process ``records``; return the ``batchItemFailures`` response."""
        # Every record's queue first: an unknown one fails the invocation
        # before any record is held.
        queues = [self.sources.queue_of(r["eventSourceARN"]) for r in records]
        now = time.monotonic()
        deliveries = [
            self._hold(record, name, queue, now)
            for record, (name, queue) in zip(records, queues, strict=True)
        ]
        try:
            failed, unstarted = self._run_each(records, deliveries, context)
        except BaseException:
            # SystemExit or KeyboardInterrupt from a handler: the invocation
            # fails, and the whole batch comes back when its visibility ends.
            for delivery in deliveries:
                self.heartbeat.drop(delivery.lease)
            raise
        self._release(unstarted)
        return batch_item_failures(records, failed)

    def _run_each(
        self,
        records: cabc.Sequence[cabc.Mapping[str, t.Any]],
        deliveries: list[MappingDelivery],
        context: LambdaContext,
    ) -> tuple[set[str], list[MappingDelivery]]:
        """Run the records in order; return the failed ids and the unstarted."""
        failed: set[str] = set()
        blocked: set[str] = set()
        unstarted: list[MappingDelivery] = []
        short = False
        for record, delivery in zip(records, deliveries, strict=True):
            group = group_of(record)
            remaining = remaining_seconds(context)
            if group in blocked or remaining < self.min_remaining_seconds:
                if group not in blocked and not short:
                    short = True
                    log.warning(
                        "lambda_time_short",
                        message_id=delivery.message_id,
                        remaining_seconds=round(remaining, 3),
                        min_remaining_seconds=self.min_remaining_seconds,
                    )
                unstarted.append(delivery)
            else:
                delivery.runtime_cap = remaining - SETTLE_RESERVE_SECONDS
                self.processing.process(delivery)
                if delivery.deleted:
                    continue
            failed.add(delivery.message_id)
            if group is not None:
                blocked.add(group)
        return failed, unstarted

    def _hold(
        self,
        record: cabc.Mapping[str, t.Any],
        name: str,
        queue: SqsQueue,
        received_at: float,
    ) -> MappingDelivery:
        """Hold ``record``: the heartbeat extends it until it is settled."""
        lease = self.heartbeat.hold(
            queue,
            name,
            str(record["receiptHandle"]),
            str(record["messageId"]),
            received_at,
            window_from=received_at - MAX_BATCHING_WINDOW_SECONDS,
        )
        return MappingDelivery(name, queue, record, lease)

    def _release(self, deliveries: list[MappingDelivery]) -> None:
        """Make records that were never started visible again at once.

        On a FIFO queue the group's first failed message is still in flight,
        so SQS holds the released ones back until it is done: order is kept.
        """
        for delivery in deliveries:
            self.heartbeat.drop(delivery.lease)
        release_leases([delivery.lease for delivery in deliveries])


def remaining_seconds(context: LambdaContext) -> float:
    """Seconds left of the invocation (infinite for a context that cannot say)."""
    read = getattr(context, "get_remaining_time_in_millis", None)
    if read is None:
        return float("inf")
    return float(read()) / 1000
