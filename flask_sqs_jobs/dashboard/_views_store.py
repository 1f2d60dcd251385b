"""The pages a store adds (recent and failed jobs, one job, workers) and schedules."""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog
from flask import abort
from flask import Blueprint
from flask import request

from ..engine.model import loggable_text
from ._job_search import BadFilter
from ._job_search import DEFAULT_JOBS
from ._job_search import FILTERS
from ._job_search import find_jobs
from ._job_search import read_filters
from ._job_search import STATUS_CHOICES
from ._pages import Dashboard
from ._pages import respond
from ._security import check_csrf
from ._security import CsrfError
from ._store_reads import cancel_job
from ._store_reads import one_job
from ._store_reads import recent_jobs
from ._store_reads import Unavailable
from ._store_reads import workers

log = structlog.get_logger(__name__)

#: How many next runs each schedule shows.
NEXT_RUNS = 3


def register(blueprint: Blueprint, dashboard: Dashboard) -> None:
    """Add the jobs, workers and schedules pages to ``blueprint``."""

    @blueprint.get("/jobs")
    def jobs_page() -> t.Any:
        data: dict[str, t.Any] = {
            "status": request.args.get("status") or None,
            "filters": {name: request.args.get(name, "") for name in FILTERS},
            "statuses": STATUS_CHOICES,
            "limit": DEFAULT_JOBS,
            "jobs": [],
            "note": None,
            "error": None,
        }
        try:
            filters = read_filters(request.args)
            data.update(limit=filters.limit, filters=filters.given)
            parts = dashboard.parts()
            found = (
                find_jobs(parts, filters)
                if filters.any
                else recent_jobs(parts, filters.limit)
            )
        except BadFilter as exc:
            return respond("jobs.html", {**data, "error": str(exc)}, 400)
        except Unavailable as exc:
            return respond("jobs.html", {**data, "note": str(exc)})
        data["jobs"] = [_hide_result(record, dashboard) for record in found]
        return respond("jobs.html", data)

    @blueprint.get("/jobs/<path:job_id>")
    def job_page(job_id: str) -> t.Any:
        data: dict[str, t.Any] = {"job_id": job_id, "job": None, "note": None}
        try:
            record = one_job(dashboard.parts(), job_id)
        except Unavailable as exc:
            data["note"] = str(exc)
            return respond("job.html", data)
        if record is None:
            abort(404, description="The store has no record of this job.")
        data["job"] = _hide_result(record, dashboard)
        return respond("job.html", data)

    @blueprint.post("/jobs/<path:job_id>/cancel")
    def cancel_action(job_id: str) -> t.Any:
        try:
            check_csrf()
        except CsrfError as exc:
            data = {"error": "Bad Request", "message": str(exc), "status": 400}
            return respond("error.html", data, 400)
        data = {"job_id": job_id, "confirmed": False, "cancelled": False}
        if request.form.get("confirmed") != "yes":
            return respond("cancel.html", data)
        try:
            cancelled = cancel_job(dashboard.parts(), job_id)
        except Unavailable as exc:
            return respond("cancel.html", {**data, "note": str(exc)})
        shown = loggable_text(job_id, 128)
        log.info("dashboard_action", action="cancel", job_id=shown, done=cancelled)
        return respond(
            "cancel.html", {**data, "confirmed": True, "cancelled": cancelled}
        )

    @blueprint.get("/workers")
    def workers_page() -> t.Any:
        now = dt.datetime.now(dt.UTC)
        data: dict[str, t.Any] = {"workers": [], "note": None}
        try:
            data["workers"] = workers(dashboard.parts(), now)
        except Unavailable as exc:
            data["note"] = str(exc)
        return respond("workers.html", data)

    @blueprint.get("/schedules")
    def schedules_page() -> t.Any:
        return respond("schedules.html", schedules_data(dashboard))


def schedules_data(dashboard: Dashboard) -> dict[str, t.Any]:
    """Each periodic job with its next runs, and its last fire when the store knows."""
    parts = dashboard.parts()
    now = dt.datetime.now(dt.UTC)
    last_fired = _last_fired_reader(dashboard)
    return {
        "runs": parts.config.scheduler,
        "schedules": [
            {
                "name": schedule.name,
                "job_type": schedule.job_type,
                "queue": schedule.queue,
                "cron": schedule.cron,
                "timezone": schedule.timezone,
                "catch_up": schedule.catch_up,
                "next": schedule.next_times(NEXT_RUNS, now),
                "last_fired": last_fired(schedule),
            }
            for schedule in parts.schedules.values()
        ],
    }


def _last_fired_reader(dashboard: Dashboard) -> t.Callable[[t.Any], t.Any]:
    app, parts = dashboard.app(), dashboard.parts()
    if not parts.schedules or parts.store is None:
        return lambda schedule: None
    from ..periodic import claims_for

    try:
        claims = claims_for(
            app, parts.schedules, parts.queue_group(), parts.require_store()
        )
    except Exception:
        log.warning("dashboard_last_fired_unavailable", exc_info=True)
        return lambda schedule: None

    def read(schedule: t.Any) -> dt.datetime | None:
        try:
            return claims.last_fired(schedule)
        except Exception:
            log.warning("dashboard_last_fired_failed", schedule=schedule.name)
            return None

    return read


def _hide_result(record: dict[str, t.Any], dashboard: Dashboard) -> dict[str, t.Any]:
    if dashboard.show_payloads():
        return record
    return {**record, "result": None, "payload": None}
