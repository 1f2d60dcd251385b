"""Claiming ticks in a DynamoDB store: pending, sent, and taking over stale claims.

The worker puts the tick item (``pk = schedule#<name>``, ``sk = tick#<tick>``)
as ``pending`` with a condition that it does not exist, sends the job, then
marks it ``sent``. A claim still ``pending`` after :data:`STALE_AFTER_SECONDS`
(its worker died between the claim and the send) is taken over by another
worker with a conditional update and sent again, with the same job id.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import time
import typing as t

import structlog
from flask import Flask

from . import _claims as claims
from ._claims import send
from ._schedule import Schedule
from ._schedule import tick_text

if t.TYPE_CHECKING:
    from ..engine import QueueGroup
    from ..store.dynamodb import DynamoDBStore

log = structlog.get_logger(__name__)

#: A claim still ``pending`` after this long is another worker's to send.
STALE_AFTER_SECONDS = 60.0


class DynamoClaims:
    """A conditional put of the tick as ``pending``, the send, then ``sent``."""

    def __init__(
        self,
        queues: QueueGroup,
        app: Flask,
        store: DynamoDBStore,
        schedules: cabc.Mapping[str, Schedule],
    ) -> None:
        self.queues = queues
        self.app = app
        self.schedules = schedules
        self.ticks = store.schedule_ticks()
        #: (schedule name, tick) -> when to look at its claim again.
        self._watched: dict[tuple[str, dt.datetime], float] = {}

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        job_id = schedule.tick_job_id(tick)
        claimed_at = time.time()
        self._watched[(schedule.name, tick)] = claimed_at + STALE_AFTER_SECONDS
        claimed = self.ticks.claim(
            schedule.name,
            tick,
            job_id,
            claimed_at=claimed_at,
            keep=claims.TICK_RETENTION,
        )
        if not claimed:
            return None
        self._send_claimed(schedule, tick)
        return job_id

    def _send_claimed(self, schedule: Schedule, tick: dt.datetime) -> None:
        claims.after_claim()
        send(self.queues, self.app, schedule, tick)
        self.ticks.mark_sent(schedule.name, tick)
        self._watched.pop((schedule.name, tick), None)

    def last_fired(self, schedule: Schedule) -> dt.datetime | None:
        tick = self.ticks.last_claimed(schedule.name)
        if tick is None:
            return None
        # A worker may have died holding this claim: look at it now.
        self._watched.setdefault((schedule.name, tick), 0.0)
        return tick

    def recover(self, now: float) -> float | None:
        for (name, tick), due in sorted(self._watched.items()):
            schedule = self.schedules.get(name)
            if due > now or schedule is None:
                continue
            self._watched.pop((name, tick))
            try:
                self._recover_one(schedule, tick, now)
            except Exception:
                log.exception(
                    "schedule_recovery_failed", schedule=name, tick=tick_text(tick)
                )
                self._watched[(name, tick)] = now + STALE_AFTER_SECONDS
        return min(self._watched.values(), default=None)

    def _recover_one(self, schedule: Schedule, tick: dt.datetime, now: float) -> None:
        claimed_at = self.ticks.pending_since(schedule.name, tick)
        if claimed_at is None:
            return
        if claimed_at + STALE_AFTER_SECONDS > now:
            self._watched[(schedule.name, tick)] = claimed_at + STALE_AFTER_SECONDS
            return
        if not self.ticks.take_over(
            schedule.name, tick, claimed_at=claimed_at, now=now
        ):
            return
        self._watched[(schedule.name, tick)] = now + STALE_AFTER_SECONDS
        self._send_claimed(schedule, tick)
        log.info(
            "schedule_fired",
            schedule=schedule.name,
            tick=tick_text(tick),
            job_id=schedule.tick_job_id(tick),
            recovered=True,
        )
