"""A job that may not run now: sent back for later.

Two kinds of job wait: one whose idempotency key another delivery holds, and
one a limit refused (outcome ``limited``).

Leaving the message in place with its visibility set to the holder's lease end
would make it come back with one more receive each time, and a long job's
duplicate would reach the queue's ``maxReceiveCount`` and be dead-lettered
although nothing failed. On a standard queue it is sent again instead, due
when that lease ends (at most SQS's 15 minutes ahead), with the same body (and
so the same job id) and attributes, like a deferral: its receive count starts
again. A FIFO queue takes no per-message delay, so there the visibility is set: each
wait then counts one receive against ``maxReceiveCount``.
"""

from __future__ import annotations

import typing as t

import structlog

from ..flow import JobLimited
from ..model import loggable_text
from ..model import MAX_DELAY_SECONDS
from ._idempotent_run import IdempotencyKeyInProgress
from ._ran import Ran
from ._reporting import log_retrying
from ._settle_calls import copy_attributes

log = structlog.get_logger(__name__)


def send_back_later(
    ran: Ran, exception: BaseException | None
) -> dict[str, t.Any] | None:
    """Send ``ran``'s job again, due when its wait ends, if it waits for a key
    or a limit.

    Returns the ``job_finished`` fields (the caller then deletes this copy),
    or None when the message must stay: not waiting, a FIFO queue, or the
    send failed.
    """
    delivery = ran.delivery
    waits = isinstance(exception, IdempotencyKeyInProgress | JobLimited)
    if not waits or delivery.queue.is_fifo:
        return None
    assert isinstance(exception, IdempotencyKeyInProgress | JobLimited)
    delay = min(MAX_DELAY_SECONDS, exception.delay_seconds)
    params: dict[str, t.Any] = {"MessageBody": delivery.body, "DelaySeconds": delay}
    attributes = copy_attributes(delivery.attributes)
    if attributes:
        params["MessageAttributes"] = attributes
    try:
        new_id = delivery.queue.send(params)
    except Exception as exc:
        event = "limit" if isinstance(exception, JobLimited) else "idempotency"
        log.warning(f"{event}_wait_send_failed", error=loggable_text(str(exc)))
        return None
    if not isinstance(exception, JobLimited):
        log_retrying(ran, delay)
    return {"retry_in_seconds": delay, "new_message_id": new_id}
