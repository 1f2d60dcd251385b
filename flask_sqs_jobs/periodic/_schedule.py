"""Periodic jobs: what ``@jobs.periodic`` and ``jobs.schedule`` declare.

A :class:`Schedule` names a job type, a cron expression in a time zone, the
queue and the payload. Where it runs (every ``flask sqs-worker``, or
EventBridge Scheduler) is decided elsewhere (``_scheduler.py``,
``_eventbridge.py``); a tick's job id and deduplication id are made here, so
every path names the same tick the same way.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import copy
import dataclasses
import datetime as dt
import json
import re
import typing as t

from flask import Flask

from ..engine.model import JSONObject
from ..engine.model import new_job_id
from ..engine.sqs import format_utc
from ..engine.sqs import string_attribute
from ._cron import CronExpression


class Enqueuer(t.Protocol):
    """What a schedule needs of the extension: its ``enqueue`` (``SQSJobs``)."""

    def enqueue(
        self,
        queue: str,
        job_type: str,
        payload: JSONObject | None = None,
        *,
        job_id: str | None = None,
        message_attributes: dict[str, dict[str, t.Any]] | None = None,
    ) -> str:
        """Enqueue a job through the app's normal path; return its MessageId."""
        ...


#: A schedule's name: what EventBridge Scheduler, job ids and FIFO group ids
#: all accept.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The message attribute (embedded scheduling) and body key (EventBridge
#: Scheduler) that carry a tick's time to ``current_job.scheduled_for``.
SCHEDULED_FOR = "scheduled_for"


@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
    """A periodic job: ``job_type`` enqueued on ``queue`` at each ``cron`` tick."""

    #: The schedule's name (1-64 characters of ``A-Za-z0-9_.-``).
    name: str
    #: The five-field cron expression, as declared.
    cron: str
    #: The IANA zone the expression is read in.
    timezone: str
    #: The job type the tick enqueues.
    job_type: str
    #: The logical queue (a key of ``SQS_JOBS_QUEUES``).
    queue: str
    #: The job's payload (a JSON object); nothing is added to it.
    payload: JSONObject
    #: Run the latest tick missed while no worker ran (needs a store).
    catch_up: bool
    expression: CronExpression = dataclasses.field(repr=False)
    jobs: Enqueuer = dataclasses.field(repr=False)

    def next_times(
        self, count: int = 3, after: dt.datetime | None = None
    ) -> list[dt.datetime]:
        """The next ``count`` ticks (aware, UTC) after ``after`` (default now)."""
        return self.expression.next_times(count, after or dt.datetime.now(dt.UTC))

    def fire(self, app: Flask | None = None) -> str:
        """Enqueue the next tick's job now, through the normal enqueue path.

        For tests (works in eager mode): the job runs as a tick's job would,
        with ``current_job.scheduled_for`` the next tick. Returns the job id.
        """
        tick = self.next_times(1)[0]
        job_id = new_job_id()
        context = app.app_context() if app is not None else contextlib.nullcontext()
        with context:
            self.jobs.enqueue(
                self.queue,
                self.job_type,
                self.job_payload(),
                **self.enqueue_options(tick, job_id),
            )
        return job_id

    def job_payload(self) -> JSONObject:
        """A copy of the payload, so a handler that changes it changes no tick."""
        return copy.deepcopy(self.payload)

    def tick_job_id(self, tick: dt.datetime) -> str:
        """The job id of ``tick``'s job: the same on every worker and every re-send."""
        return f"{self.name}:{tick_text(tick)}"

    def enqueue_options(
        self, tick: dt.datetime, job_id: str | None = None
    ) -> dict[str, t.Any]:
        """The enqueue keyword arguments of ``tick``'s job."""
        return {
            "job_id": job_id or self.tick_job_id(tick),
            "message_attributes": {SCHEDULED_FOR: string_attribute(format_utc(tick))},
        }


def tick_text(tick: dt.datetime) -> str:
    """A tick as text: ISO 8601 in UTC to the second (``2026-03-29T01:00:00Z``)."""
    return tick.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def declare(
    schedules: dict[str, Schedule],
    jobs: Enqueuer,
    name: str,
    *,
    cron: str,
    job_type: str | None,
    timezone: str,
    queue: str,
    payload: JSONObject | None,
    catch_up: bool,
) -> Schedule:
    """Check a schedule and add it to ``schedules``.

    :raises ValueError: a bad name, cron expression, zone or payload, or a
        name already declared; the message names the schedule.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            "a schedule's name must be 1-64 characters of A-Za-z0-9_.- (it names the"
            f" EventBridge schedule and the tick's job id); got {name!r}"
        )
    if name in schedules:
        raise ValueError(
            f"schedule {name!r} is already declared; each schedule has one name"
        )
    try:
        expression = CronExpression(cron, timezone)
        payload = _checked_payload(payload)
    except ValueError as exc:
        raise ValueError(f"schedule {name!r}: {exc}") from None
    if not isinstance(queue, str) or not queue:
        raise ValueError(f"schedule {name!r}: queue must be a logical queue name")
    schedule = Schedule(
        name=name,
        cron=cron,
        timezone=timezone,
        job_type=job_type or name,
        queue=queue,
        payload=payload,
        catch_up=bool(catch_up),
        expression=expression,
        jobs=jobs,
    )
    schedules[name] = schedule
    return schedule


def _checked_payload(payload: object) -> JSONObject:
    if payload is None:
        return {}
    if not isinstance(payload, cabc.Mapping):
        raise ValueError(f"payload must be a dict; got {type(payload).__name__}")
    try:
        return t.cast(JSONObject, json.loads(json.dumps(dict(payload))))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload must be JSON: {exc}") from None


def job_type_of(target: object) -> str | None:
    """The job type named by ``jobs.schedule(job_type=...)``: a str or a task."""
    if target is None or isinstance(target, str):
        return target
    for attribute in ("job_type", "name"):
        value = getattr(target, attribute, None)
        if isinstance(value, str):
            return value
    raise ValueError(
        f"job_type must be a job type (str) or a task; got {type(target).__name__}"
    )
