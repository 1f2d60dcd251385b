"""The embedded scheduler: a thread in every ``flask sqs-worker`` that fires ticks.

It sleeps on an :class:`threading.Event` until the next tick is due (never
polling), then hands the tick to its :class:`TickClaims`, which makes sure
one worker in all enqueues it. Ticks missed while no worker ran are
skipped; with ``catch_up=True`` the latest of them runs at start-up.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import importlib.util
import threading
import time
import typing as t

import structlog
from flask import Flask

from ._claims import TickClaims
from ._schedule import Schedule
from ._schedule import tick_text

if t.TYPE_CHECKING:
    from ..engine import QueueGroup
    from ..engine.model import Hooks
    from ..engine.sqs import QueueDefinition
    from ..store.model import JobStore

log = structlog.get_logger(__name__)

#: The longest sleep, so a wall clock set forward or back is noticed.
MAX_SLEEP_SECONDS = 300.0
#: How soon a tick whose claim failed is tried again (until the next tick).
FIRE_RETRY_SECONDS = 2.0


def utc_now() -> dt.datetime:
    """The scheduler's clock (tests replace it)."""
    return dt.datetime.now(dt.UTC)


class Scheduler:
    """Fire each schedule's ticks through ``claims``, in one thread of its own.

    :param clock: the current time (aware); :func:`utc_now` by default.
    """

    name = "scheduler"

    def __init__(
        self,
        schedules: cabc.Iterable[Schedule],
        claims: TickClaims,
        *,
        hooks: Hooks | None = None,
        clock: cabc.Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.schedules = list(schedules)
        self.claims = claims
        self.hooks = hooks
        self.clock = clock or (lambda: utc_now())
        self._next: dict[str, dt.datetime] = {}
        #: Per schedule, the tick whose claim failed, tried again at ``_next``.
        self._retrying: dict[str, dt.datetime] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.prime(self.clock())
        self._thread = threading.Thread(
            target=self._run, name="flask-sqs-jobs-scheduler", daemon=True
        )
        self._thread.start()

    def prime(self, now: dt.datetime) -> None:
        """Find each schedule's next tick after ``now``; run ``catch_up`` ones.

        Reading each schedule's latest claim also lets the claims find one a
        dead worker left unsent.
        """
        for schedule in self.schedules:
            try:
                last = self.claims.last_fired(schedule)
            except Exception:
                log.exception("schedule_last_tick_unknown", schedule=schedule.name)
            else:
                latest = schedule.expression.latest_at_or_before(now)
                if schedule.catch_up and last is not None and latest > last:
                    self.fire(schedule, latest)
            self._next[schedule.name] = schedule.expression.next_after(now)
        log.info(
            "scheduler_started",
            schedules={name: tick_text(tick) for name, tick in self._next.items()},
        )

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def run_due(self, now: dt.datetime) -> float:
        """Fire every tick due at ``now``; return the seconds until the next one.

        A tick whose claim failed (the store or SQS down) is tried again every
        :data:`FIRE_RETRY_SECONDS` until the schedule's next tick is due.
        """
        for schedule in self.schedules:
            name = schedule.name
            if self._next[name] > now:
                continue
            tick = self._retrying.pop(name, None)
            if tick is None:
                tick = self._next[name]
            elif (newer := schedule.expression.next_after(tick)) <= now:
                tick = newer  # the failed tick is missed: a newer one is due
            fired = self._claim(schedule, tick)
            # Ticks that passed while this one was sent (or the machine
            # slept) are skipped, as missed ones are.
            following = schedule.expression.next_after(max(tick, now))
            again = now + dt.timedelta(seconds=FIRE_RETRY_SECONDS)
            if fired is None and again < following:
                self._retrying[name] = tick
                self._next[name] = again
            else:
                self._next[name] = following
        wake = min(self._next.values()) if self._next else now
        seconds = (wake - now).total_seconds()
        recheck = self.claims.recover(time.time())
        if recheck is not None:
            seconds = min(seconds, recheck - time.time())
        return max(0.0, min(seconds, MAX_SLEEP_SECONDS))

    def fire(self, schedule: Schedule, tick: dt.datetime) -> str | None:
        """Enqueue ``tick`` unless another worker did; log and count it if so."""
        fired = self._claim(schedule, tick)
        return fired[0] if fired is not None else None

    def _claim(self, schedule: Schedule, tick: dt.datetime) -> tuple[str | None] | None:
        """Fire ``tick``: (its job id, or None when taken), or None when it failed."""
        try:
            job_id = self.claims.fire(schedule, tick)
        except Exception:
            log.exception(
                "schedule_fire_failed",
                schedule=schedule.name,
                tick=tick_text(tick),
                retry_in=FIRE_RETRY_SECONDS,
            )
            return None
        if job_id is None:
            log.debug(
                "schedule_tick_taken", schedule=schedule.name, tick=tick_text(tick)
            )
            return (None,)
        log.info(
            "schedule_fired",
            schedule=schedule.name,
            tick=tick_text(tick),
            job_id=job_id,
        )
        if self.hooks is not None:
            self.hooks.schedule_fired(schedule.name)
        return (job_id,)

    def _run(self) -> None:
        timeout = 0.0
        while not self._stop.wait(timeout):
            try:
                timeout = self.run_due(self.clock())
            except Exception:
                log.exception("scheduler_failed")
                timeout = MAX_SLEEP_SECONDS / 10


class SchedulingError(ValueError):
    """Periodic jobs cannot run as configured (``flask sqs-worker`` exits 2)."""


def scheduler_service(
    app: Flask,
    schedules: cabc.Mapping[str, Schedule],
    queues: QueueGroup,
    store: JobStore | None,
    hooks: Hooks | None,
) -> Scheduler | None:
    """The embedded scheduler of one worker process, or None when it has none.

    Call :func:`check_scheduling` first (at start-up).
    """
    if not schedules:
        return None
    return Scheduler(
        schedules.values(), claims_for(app, schedules, queues, store), hooks=hooks
    )


def check_scheduling(
    schedules: cabc.Mapping[str, Schedule],
    *,
    embedded: bool,
    definitions: cabc.Mapping[str, QueueDefinition],
    store: JobStore | None,
    handlers: cabc.Container[str],
) -> bool:
    """Whether workers run a scheduler; raise when they cannot.

    Reads only the configuration, so ``flask sqs-worker`` checks it once
    before starting any process.

    :param embedded: ``SQS_JOBS_SCHEDULER`` is ``"embedded"``.
    :param handlers: the job types the app handles (an unhandled one is logged).
    :raises SchedulingError: a schedule's queue is unknown, or its ticks
        cannot be claimed exactly once (no store and a standard queue).
    """
    if not schedules or not embedded:
        return False
    for schedule in schedules.values():
        definition = definitions.get(schedule.queue)
        if definition is None:
            raise SchedulingError(
                f"schedule {schedule.name!r} targets queue {schedule.queue!r}, which"
                " is not in SQS_JOBS_QUEUES"
            )
        if store is None and not definition.physical_name.endswith(".fifo"):
            raise SchedulingError(
                f"schedule {schedule.name!r} cannot be enqueued exactly once: its"
                f" queue {schedule.queue!r} is not FIFO and no job store is"
                " configured; configure SQS_JOBS_STORE_URL, use a FIFO queue, or"
                ' set SQS_JOBS_SCHEDULER = "eventbridge"'
            )
        if schedule.job_type not in handlers:
            log.warning(
                "schedule_job_type_unhandled",
                schedule=schedule.name,
                job_type=schedule.job_type,
            )
    outbox = "flask_sqs_jobs.store.outbox._write"
    sql_store = store is not None and store.kind != "dynamodb"
    if sql_store and importlib.util.find_spec(outbox) is None:
        raise SchedulingError(
            "periodic jobs on a SQL store need the transactional outbox"
            f" ({outbox}), which this installation lacks"
        )
    return True


def claims_for(
    app: Flask,
    schedules: cabc.Mapping[str, Schedule],
    queues: QueueGroup,
    store: JobStore | None,
) -> TickClaims:
    """How this app's ticks are claimed: its store, or FIFO deduplication."""
    from ._claims import FifoClaims
    from ._claims import SqlClaims
    from ._dynamodb_claims import DynamoClaims

    if store is None:
        for schedule in schedules.values():
            if schedule.catch_up:
                log.warning("schedule_catch_up_needs_store", schedule=schedule.name)
        return FifoClaims(queues, app)
    if store.kind == "dynamodb":
        return DynamoClaims(queues, app, t.cast(t.Any, store), schedules)
    return SqlClaims(queues, app, t.cast(t.Any, store))
