"""Running failed jobs again: one job, or every failed job a search finds.

Each is a POST with a CSRF token, answered first with a confirmation that
counts what would run (``confirmed=yes`` then runs it); the jobs go through
``retry_records``: the same job id, a new attempt, the one produce pipeline.
"""

from __future__ import annotations

import typing as t

import structlog
from flask import Blueprint
from flask import request

from ..store.records import retry_records
from ..store.records import why_not_retryable
from ._job_search import BadFilter
from ._job_search import FILTERS
from ._job_search import find_records
from ._job_search import MAX_JOBS
from ._job_search import read_filters
from ._pages import Dashboard
from ._pages import respond
from ._security import check_csrf
from ._security import CsrfError
from ._store_reads import Unavailable

log = structlog.get_logger(__name__)


def register(blueprint: Blueprint, dashboard: Dashboard) -> None:
    """Add the retry actions to ``blueprint``."""

    @blueprint.post("/jobs/<path:job_id>/retry")
    def retry_one(job_id: str) -> t.Any:
        return _retry(dashboard, {"job_id": job_id})

    @blueprint.post("/retry")
    def retry_found() -> t.Any:
        given = {name: request.form.get(name, "") for name in FILTERS}
        return _retry(dashboard, given)


def _retry(dashboard: Dashboard, given: dict[str, str]) -> t.Any:
    try:
        check_csrf()
    except CsrfError as exc:
        error = {"error": "Bad Request", "message": str(exc), "status": 400}
        return respond("error.html", error, 400)
    filters = read_filters({**given, "limit": str(MAX_JOBS)})
    data: dict[str, t.Any] = {
        "filters": filters.given,
        "confirmed": False,
        "expected": _count(request.form.get("expected")),
    }
    parts = dashboard.parts()
    try:
        found = find_records(parts, filters, failed_only=True)
    except BadFilter as exc:
        return respond("retry.html", {**data, "error": str(exc)}, 400)
    except Unavailable as exc:
        return respond("retry.html", {**data, "note": str(exc)})
    runnable = [record for record in found if why_not_retryable(record) is None]
    data.update(matching=len(runnable), not_runnable=len(found) - len(runnable))
    if request.form.get("confirmed") != "yes":
        data["job_ids"] = [record.job_id for record in runnable]
        return respond("retry.html", data)
    report = retry_records(parts.require_store(), parts.queue_group(), runnable)
    log.info("dashboard_action", action="retry", sent=len(report.sent))
    return respond("retry.html", {**data, "confirmed": True, **report.as_dict()})


def _count(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 10 else None
