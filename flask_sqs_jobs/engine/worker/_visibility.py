"""How long a failed job waits; setting a visibility within SQS's limits."""

from __future__ import annotations

import math
import random
import time

from ..model import MAX_VISIBILITY_TIMEOUT
from ..model import Retry
from ..model import RetryJob
from ..sqs import CallError
from ._delivery import Delivery
from ._lease import VISIBILITY_WINDOW_SECONDS
from ._lease import WINDOW_MARGIN_SECONDS


def retry_delay(
    delivery: Delivery, exception: BaseException | None, policy: Retry | None = None
) -> int | None:
    """Seconds a failed job waits before its next attempt; None: SQS's own timeout.

    ``RetryJob`` names its own delay; otherwise the handler's retry policy
    decides, or else the queue's ``retry_backoff_seconds``: a random whole
    number of seconds in ``[d, 2d]``, ``d = base * 2 ** (receive_count - 1)``.
    """
    if isinstance(exception, RetryJob):
        return exception.delay_seconds
    if policy is not None:
        return policy.delay(delivery.receive_count)
    base = delivery.queue.retry_backoff_seconds
    if base is None:
        return None
    # Both bounded first, so that no receive count or base can overflow.
    exponent = min(max(0, delivery.receive_count - 1), 64)
    delay = min(
        MAX_VISIBILITY_TIMEOUT, min(base, MAX_VISIBILITY_TIMEOUT) * 2.0**exponent
    )
    # Whole seconds within [d, 2d], as SQS takes only ints.
    low = math.ceil(delay)
    high = max(low, math.floor(min(MAX_VISIBILITY_TIMEOUT, 2 * delay)))
    return random.randint(low, high)


def change_visibility(
    delivery: Delivery, seconds: int, *, visible_now: bool = False
) -> tuple[int, CallError]:
    """Set the visibility, already capped to the receive's 12 hours.

    Returns the seconds set and the error. A cap of 0 means the window is
    spent: SQS would refuse more, and 0 would make the message visible at
    once, so nothing is sent. Only a caller asking for 0 gets 0. A server that
    counts the 12 hours from the send instead (moto does) refuses a message
    that waited long in the queue: the change is then sent again within that
    stricter window, rather than leaving the message soon visible.
    """
    if seconds == 0 and not visible_now:
        return 0, None
    error = delivery.queue.change_visibility(delivery.receipt_handle, seconds)
    if error is None or error[0] != "InvalidParameterValue" or seconds == 0:
        return seconds, error
    sent_at = delivery.sent_at
    if sent_at is None:
        return seconds, error
    left = math.floor(
        sent_at + VISIBILITY_WINDOW_SECONDS - WINDOW_MARGIN_SECONDS - time.time()
    )
    if not 0 < left < seconds:
        return seconds, error
    return left, delivery.queue.change_visibility(delivery.receipt_handle, left)


def is_last_receive(delivery: Delivery) -> bool:
    """Whether SQS moves the message to its dead-letter queue if it comes back."""
    policy = delivery.queue.redrive_policy()
    return policy is not None and delivery.receive_count >= policy[1]


def describe(error: CallError) -> str | None:
    """A failed call's error for a log line: ``"Code: message"``."""
    return None if error is None else f"{error[0]}: {error[1]}"
