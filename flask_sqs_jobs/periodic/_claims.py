"""How a tick is enqueued exactly once however many workers run it.

Three ways, one per set-up (``docs/periodic.md``):

- :class:`SqlClaims`: the tick's row in ``sqs_jobs_schedule_ticks`` and the
  job's outbox row in one transaction; the outbox relay sends what a killed
  worker did not.
- ``DynamoClaims`` (``_dynamodb_claims.py``): a conditional put of the tick
  item as ``pending``, the send, then ``sent``; a claim left ``pending`` too
  long is taken over and sent again with the same job id.
- :class:`FifoClaims`: no store; every worker sends, and the FIFO queue's
  deduplication id (name and tick) keeps one.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog
from flask import Flask

from ._schedule import Schedule
from ._schedule import tick_text

if t.TYPE_CHECKING:
    from ..engine import QueueGroup
    from ..store.sql import SQLAlchemyStore

log = structlog.get_logger(__name__)

#: How long tick rows and items are kept (the latest of each schedule is
#: what ``catch_up`` reads).
TICK_RETENTION = dt.timedelta(days=7)


class TickClaims(t.Protocol):
    """Enqueue a tick's job unless another worker did."""

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        """Enqueue ``tick``'s job if this worker claims it; return its job id."""

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        """The latest tick of ``schedule`` any worker claimed, if known."""

    def recover(self, now: float) -> float | None:
        """Send claims their worker left unsent; return when to look again."""


def send(
    queues: QueueGroup,
    app: Flask,
    schedule: Schedule,
    tick: dt.datetime,
    **options: t.Any,
) -> str:
    """Enqueue ``tick``'s job directly to SQS (in an app context); return its job id."""
    enqueue = schedule.enqueue_options(tick)
    with app.app_context():
        queues.enqueue(
            schedule.queue,
            schedule.job_type,
            schedule.job_payload(),
            **enqueue,
            **options,
        )
    return t.cast(str, enqueue["job_id"])


class FifoClaims:
    """No store: every worker sends; the FIFO deduplication id keeps one."""

    def __init__(self, queues: QueueGroup, app: Flask) -> None:
        self.queues = queues
        self.app = app

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        return send(
            self.queues,
            self.app,
            schedule,
            tick,
            message_deduplication_id=dedup_id(schedule, tick),
            message_group_id=schedule.name,
        )

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        return None

    def recover(self, now: float) -> float | None:
        return None


def dedup_id(schedule: Schedule, tick: dt.datetime) -> str:
    """The FIFO MessageDeduplicationId of a tick: ``name:2026-03-29T01:00:00Z``.

    Schedule names are 1-64 characters of ``A-Za-z0-9_.-``, so this is always
    within SQS's 128 characters of letters, digits and punctuation.
    """
    return f"{schedule.name}:{tick_text(tick)}"


class SqlClaims:
    """The tick's row and the job's outbox row, committed together."""

    def __init__(self, queues: QueueGroup, app: Flask, store: SQLAlchemyStore) -> None:
        # The transactional outbox (flask_sqs_jobs.store.outbox._write).
        from ..store.outbox import add_to_outbox

        self.add_to_outbox = add_to_outbox
        self.queues = queues
        self.app = app
        self.ticks = store.schedule_ticks()

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        options = schedule.enqueue_options(tick)
        job_id: str = options["job_id"]

        def write_job(session: t.Any) -> None:
            self.add_to_outbox(
                session,
                self.queues,
                schedule.queue,
                schedule.job_type,
                schedule.job_payload(),
                **options,
            )

        with self.app.app_context():
            claimed = self.ticks.claim(
                schedule.name, tick, job_id, write_job, keep=TICK_RETENTION
            )
        if not claimed:
            return None
        after_claim()
        return job_id

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        return self.ticks.last_claimed(schedule.name)

    def recover(self, now: float) -> float | None:
        return None


def after_claim() -> None:
    """Called once a claim is made, before its job is sent (a seam for crash tests)."""
