"""The queues page and a queue's dead letters, with redrive and delete."""

from __future__ import annotations

import datetime as dt
import typing as t

import structlog
from botocore.exceptions import BotoCoreError
from botocore.exceptions import ClientError
from flask import abort
from flask import Blueprint
from flask import request

from ..config import AWSSetupError
from ..engine.model import QueueNotFoundError
from ..engine.ops import counts
from ..engine.ops import dead_letter_queue
from ._charts import chart
from ._dead_letters import ActionResult
from ._dead_letters import count_matching
from ._dead_letters import delete_all
from ._dead_letters import delete_matching
from ._dead_letters import delete_selected
from ._dead_letters import redrive_all
from ._dead_letters import redrive_matching
from ._dead_letters import redrive_selected
from ._letter_filter import BadLetterFilter
from ._letter_filter import LetterFilter
from ._letter_filter import read_letter_filter
from ._letters_page import dead_letters_data
from ._pages import Dashboard
from ._pages import respond
from ._request_checks import peek_refusal
from ._security import check_csrf
from ._security import CsrfError
from ._store_reads import throughput
from ._store_reads import Unavailable

if t.TYPE_CHECKING:
    from ..engine.sqs import SqsQueue

log = structlog.get_logger(__name__)

#: What a failed SQS call raises: shown on the page, never a crash.
SQS_ERRORS = (BotoCoreError, ClientError, QueueNotFoundError, AWSSetupError)
#: Dead letters shown by default, and at most.
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
ACTIONS = ("redrive", "delete")
SCOPES = ("selected", "all", "filtered")
MAX_MESSAGE_ID = 128
#: A queue's row in eager mode, where jobs run at once and never reach SQS.
EAGER_NOTE = "eager mode (SQS_JOBS_EAGER): jobs run at once and no SQS queue is used"


def register(blueprint: Blueprint, dashboard: Dashboard) -> None:
    """Add the queue pages to ``blueprint``."""

    @blueprint.get("/")
    def queues() -> t.Any:
        charts = request.args.get("charts") != "no"
        return respond("queues.html", queues_data(dashboard, charts=charts))

    @blueprint.get("/queues/<name>/dead-letters")
    def dead_letters(name: str) -> t.Any:
        limit = request.args.get("limit", DEFAULT_LIMIT, type=int)
        limit = max(1, min(MAX_LIMIT, limit or DEFAULT_LIMIT))
        queue = _configured(dashboard, name)
        try:
            chosen = read_letter_filter(request.args)
        except BadLetterFilter as exc:
            return respond("error.html", _error("Bad Request", str(exc), 400), 400)
        try:
            data = dead_letters_data(
                dashboard, name, queue, limit, peek_refusal(request)
            )
        except SQS_ERRORS as exc:
            return _sqs_failed(exc)
        data["filter"] = chosen.as_dict()
        data["dead_letters"] = [
            letter
            for letter in data["dead_letters"]
            if chosen.matches_letter(letter["job_type"], letter["reason"])
        ]
        return respond("dead_letters.html", data)

    @blueprint.post("/queues/<name>/dead-letters")
    def dead_letter_action(name: str) -> t.Any:
        queue = _configured(dashboard, name)
        try:
            check_csrf()
        except CsrfError as exc:
            return respond("error.html", _error("Bad Request", str(exc), 400), 400)
        action = request.form.get("action", "")
        scope = request.form.get("scope", "")
        message_ids = request.form.getlist("message_id")
        try:
            chosen = read_letter_filter(request.form)
        except BadLetterFilter as exc:
            return respond("error.html", _error("Bad Request", str(exc), 400), 400)
        problem = _check_action(action, scope, message_ids, chosen)
        if problem:
            return respond("error.html", _error("Bad Request", problem, 400), 400)
        order = {
            "queue": name,
            "action": action,
            "scope": scope,
            "message_ids": message_ids if scope == "selected" else [],
            "filter": chosen.as_dict() if scope == "filtered" else None,
            "expected": _count(request.form.get("expected")),
        }
        if request.form.get("confirmed") != "yes":
            try:
                order.update(_matching(queue, scope, chosen))
            except SQS_ERRORS as exc:
                return _sqs_failed(exc)
            return respond("confirm.html", {**order, "confirmed": False})
        try:
            result = _perform(name, queue, action, scope, message_ids, chosen)
        except SQS_ERRORS as exc:
            log.warning("dashboard_action_failed", queue=name, action=action)
            return _sqs_failed(
                exc,
                "No dead letter was deleted before it was sent again: what was not"
                " done is still in the dead-letter queue.",
            )
        log.info("dashboard_action", queue=name, action=action, **result.as_dict())
        return respond("result.html", {**order, "confirmed": True, **result.as_dict()})


def queues_data(dashboard: Dashboard, *, charts: bool = True) -> dict[str, t.Any]:
    """Counts per queue and its DLQ, and the last hour's charts with a store
    (unless ``charts`` is False: the live refresh needs only the counts)."""
    parts = dashboard.parts()
    names = list(parts.config.definitions)  # each priority level too
    rows = []
    eager = parts.config.eager
    for name in names:
        entry: dict[str, t.Any] = {"queue": name, "error": None, "dead_letter": None}
        if eager:
            entry["error"] = EAGER_NOTE
            rows.append(entry)
            continue
        try:
            queue = parts.queue_group().queue(name)
            entry.update(counts(queue).as_dict())
            dlq = dead_letter_queue(queue)
            if dlq is not None:
                entry["dead_letter"] = counts(dlq).as_dict()
        except SQS_ERRORS as exc:
            entry["error"] = f"SQS call failed: {exc}"
        rows.append(entry)
    data: dict[str, t.Any] = {
        "queues": rows,
        "store": parts.store is not None,
        "throughput": None,
        "throughput_note": None,
        "generated_at": dt.datetime.now(dt.UTC),
    }
    if not charts:
        return data
    try:
        found = throughput(parts, names, data["generated_at"])
    except Unavailable as exc:
        data["throughput_note"] = str(exc)
    else:
        data["throughput"] = found.as_dict()
        data["charts"] = {
            name: chart(found.succeeded[name], found.failed[name], found.start)
            for name in names
        }
    return data


def _configured(dashboard: Dashboard, name: str) -> SqsQueue:
    """The configured queue ``name``; a 404 for any other name."""
    if name not in dashboard.parts().config.definitions:
        abort(404, description="No such queue in SQS_JOBS_QUEUES.")
    if dashboard.parts().config.eager:
        abort(404, description=f"No dead letters: {EAGER_NOTE}.")
    return dashboard.parts().queue_group().queue(name)


def _check_action(
    action: str, scope: str, message_ids: list[str], chosen: LetterFilter
) -> str | None:
    if action not in ACTIONS:
        return f"action must be one of {', '.join(ACTIONS)}"
    if scope not in SCOPES:
        return f"scope must be one of {', '.join(SCOPES)}"
    if scope == "filtered" and not chosen.any:
        return "no filter given: choose a job type or an error type, or choose all"
    if scope == "selected":
        if not message_ids:
            return "no dead letter selected: tick at least one, or choose all"
        if len(message_ids) > MAX_LIMIT:
            return f"at most {MAX_LIMIT} dead letters can be selected at once"
        if any(not 0 < len(m) <= MAX_MESSAGE_ID for m in message_ids):
            return "a selected MessageId is empty or too long"
    return None


def _matching(queue: SqsQueue, scope: str, chosen: LetterFilter) -> dict[str, t.Any]:
    """For a filtered action's confirmation: how many letters match now, of how
    many read (each received once and put back); nothing for other scopes."""
    dlq = dead_letter_queue(queue)
    if scope != "filtered" or dlq is None:
        return {}
    dlq.read_attributes()
    if dlq.redrive_policy() is not None:
        abort(
            409,
            description="This dead-letter queue has a RedrivePolicy of its own:"
            " counting its letters would move them on. Use all.",
        )
    matching, read = count_matching(dlq, chosen)
    return {"matching": matching, "read": read}


def _perform(
    name: str,
    queue: SqsQueue,
    action: str,
    scope: str,
    message_ids: list[str],
    chosen: LetterFilter,
) -> ActionResult:
    dlq = dead_letter_queue(queue)
    if dlq is None:
        abort(404, description="This queue has no dead-letter queue.")
    if scope == "filtered":
        if action == "redrive":
            return redrive_matching(dlq, queue, name, chosen)
        return delete_matching(dlq, chosen)
    if action == "redrive":
        if scope == "all":
            return redrive_all(dlq, queue, name)
        return redrive_selected(dlq, queue, name, message_ids)
    if scope == "all":
        return delete_all(dlq)
    return delete_selected(dlq, message_ids)


def _count(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 10 else None


def _error(name: str, message: str, status: int) -> dict[str, t.Any]:
    return {"error": name, "message": message, "status": status}


def _sqs_failed(exc: Exception, note: str = "") -> t.Any:
    message = f"SQS call failed: {exc}" + (f" {note}" if note else "")
    return respond("error.html", _error("Bad Gateway", message, 502), 502)
