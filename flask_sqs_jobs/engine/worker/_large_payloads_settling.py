"""Settling a message whose offloaded body was not read.

The message never reached a handler, so it has no ``job_finished`` line: one
``large_payload_*`` line says what happened. What no retry can fix is
dead-lettered with its reason (the pointer and the object kept, for
inspection and redrive) where the queue has a dead-letter queue, otherwise
deleted, except a pointer outside the configured bucket or prefix: that one
is never deleted by a worker that may not read it, only hidden for a while
(another worker, or this one reconfigured, may). An S3 error, or a failed
move to the dead-letter queue, leaves the message for redelivery.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import structlog

from ..sqs import CallError
from ..sqs import PayloadNotFound
from ..sqs import PayloadTooLarge
from ..sqs import PayloadUnreadable
from ..sqs import PointerRefused
from ._delivery import Delivery

if t.TYPE_CHECKING:
    from ._reporting import Settled

log = structlog.get_logger(__name__)

#: The event logged for each reason a body is not read.
EVENTS: dict[type[BaseException], str] = {
    PayloadNotFound: "large_payload_missing",
    PayloadTooLarge: "large_payload_too_large",
    PayloadUnreadable: "large_payload_unreadable",
    PointerRefused: "large_payload_pointer_refused",
}


def settle_unread(
    delivery: Delivery,
    exc: BaseException | None,
    *,
    dead_letter: cabc.Callable[[], Settled | None],
    delete: cabc.Callable[[], Settled],
    hide: cabc.Callable[[], tuple[int, CallError]],
) -> None:
    """Settle ``delivery``, whose body could not be read because of ``exc``."""
    event = next((e for kind, e in EVENTS.items() if isinstance(exc, kind)), None)
    if event is None:
        log.warning("large_payload_unavailable", outcome="retry", error=str(exc))
        return
    if delivery.queue.redrive_policy() is not None:
        settled = dead_letter()
        if settled is None:
            # The dead-letter queue is unknown for now or refused the letter
            # (logged): the next receive tries again, and SQS's redrive applies.
            log.warning(event, outcome="retry", error=str(exc))
            return
    elif isinstance(exc, PointerRefused):
        seconds, error = hide()
        log.warning(
            event,
            outcome="retry",
            error=str(exc),
            visibility_timeout=seconds,
            visibility_error=None if error is None else f"{error[0]}: {error[1]}",
        )
        return
    else:
        settled = delete()
    fields = dict(settled.fields)
    if "error" in fields:
        fields["delete_error"] = fields.pop("error")
    log.error(event, outcome=settled.outcome.value, error=str(exc), **fields)
