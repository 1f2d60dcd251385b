"""What a queue's dead-letters page shows, and when it may look at them at all.

Looking is a receive: SQS counts every ReceiveMessage of a message, so a
peek is not free. A dead-letter queue with a RedrivePolicy of its own moves a
letter on after its ``maxReceiveCount`` receives, so views alone would empty
it: such a queue is never peeked. Any other is peeked only for a request of
the dashboard's own (``_request_checks.peek_refusal``), so an ``<img>`` or a
link on another site shows the page without reading a single letter.
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t

from ..engine.ops import counts
from ..engine.ops import dead_letter_queue
from ..engine.ops import describe_dead_letter
from ..engine.ops import other_source
from ..engine.ops import peek
from ._pages import Dashboard
from ._security import csrf_token

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from ..engine.sqs import SqsQueue

#: Characters of a body or payload shown.
PREVIEW_CHARS = 2000


def dead_letters_data(
    dashboard: Dashboard,
    name: str,
    queue: SqsQueue,
    limit: int,
    refusal: str | None = None,
) -> dict[str, t.Any]:
    """A queue's dead letters, peeked (made visible again at once, never deleted).

    Not peeked when ``refusal`` says why this request may not, nor when the
    dead-letter queue has a RedrivePolicy of its own: the answer then has
    ``peek_refused`` (``reason``, and ``own_redrive_policy``: whether asking
    again from the dashboard would not help).
    """
    dlq = dead_letter_queue(queue)
    data: dict[str, t.Any] = {
        "queue": name,
        "dead_letter_queue": None,
        "counts": None,
        "limit": limit,
        "payloads_shown": dashboard.show_payloads(),
        "dead_letters": [],
        # For scripts: the token of this session, as the page's forms carry it.
        "csrf_token": csrf_token(),
    }
    if dlq is None:
        return data
    data["dead_letter_queue"] = dlq.url
    data["counts"] = counts(dlq).as_dict()
    own = _own_redrive_policy(dlq)
    if own is not None or refusal is not None:
        data["peek_refused"] = {
            "reason": own or refusal,
            "own_redrive_policy": own is not None,
        }
        return data
    data["dead_letters"] = [
        _letter(message, name, queue, data["payloads_shown"])
        for message in peek(dlq, limit)
    ]
    return data


def _own_redrive_policy(dlq: SqsQueue) -> str | None:
    """Why ``dlq`` is never peeked (its own RedrivePolicy), or None."""
    dlq.read_attributes()
    policy = dlq.redrive_policy()
    if policy is None:
        return None
    target, max_receives = policy
    return (
        "this dead-letter queue has a RedrivePolicy of its own: SQS moves a"
        f" message received {max_receives} time(s) on to"
        f" {target.rsplit(':', 1)[-1]}, and reading a message here is a receive,"
        " so the dashboard does not read them"
    )


def _letter(
    message: MessageTypeDef, name: str, queue: SqsQueue, show_payloads: bool
) -> dict[str, t.Any]:
    letter = describe_dead_letter(message)
    reason = letter["dead_letter"]
    if reason is not None and not isinstance(reason, dict):
        reason = {"error": json.dumps(reason)}
    sent = letter.get("sent_timestamp")
    entry = {
        "message_id": letter["message_id"],
        "job_type": letter["job_type"],
        "reason": reason,
        "receive_count": letter["receive_count"],
        "sent_at": _from_millis(sent),
        "offloaded_bytes": letter["offloaded_bytes"],
        # The queue it records as its source when that is another: not redriven here.
        "other_queue": other_source(message, name, queue),
        "preview": None,
        "truncated": False,
    }
    if show_payloads:
        if letter["payload"] is not None:
            text = json.dumps(letter["payload"], indent=2, ensure_ascii=False)
        else:
            text = str(letter["body"] or "")
        entry["preview"] = text[:PREVIEW_CHARS]
        entry["truncated"] = len(text) > PREVIEW_CHARS
    return entry


def _from_millis(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(int(str(value)) / 1000, dt.UTC)
    except (TypeError, ValueError, OverflowError):
        return None
