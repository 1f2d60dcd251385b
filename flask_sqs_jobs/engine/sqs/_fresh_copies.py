"""Retrying an offloaded send with a new object, never with the same pointer.

botocore retries a request whose answer was lost (a reset, a timeout, a 5xx)
by sending it again as it was. For a message sent through S3 that makes two
messages share one object: the first one processed deletes it, and the other
is dead-lettered as ``PayloadNotFound`` although its job ran. So while an
offloaded request is in flight, botocore's retry of such a failure is
stopped (through its public ``needs-retry`` event) and the caller retries
with a new object: each copy SQS may hold then has an object of its own.
botocore still retries the refusals SQS did not apply, such as throttling.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import random
import threading
import time
import typing as t

from botocore.exceptions import ClientError

#: Sends of one offloaded request, the first included.
ATTEMPTS = 3

_OPERATIONS = ("SendMessage", "SendMessageBatch")
_HANDLER_ID = "flask-sqs-jobs-single-copy"
_in_flight = threading.local()


def _stop_blind_retry(
    caught_exception: BaseException | None = None,
    response: tuple[t.Any, dict[str, t.Any]] | None = None,
    operation: t.Any = None,
    **kwargs: t.Any,
) -> None:
    """Raise instead of letting botocore resend an offloaded request as it was."""
    if not getattr(_in_flight, "active", False):
        return
    if caught_exception is not None:
        raise caught_exception
    if response is not None and response[0].status_code >= 500:
        raise ClientError(t.cast(t.Any, response[1]), operation.name)


@contextlib.contextmanager
def single_copy(client: object) -> cabc.Iterator[None]:
    """Within the block, this thread's sends on ``client`` are not resent blindly.

    A client without botocore's events (a wrapper) keeps its own retries.
    """
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        for operation in _OPERATIONS:
            events.register(
                f"needs-retry.sqs.{operation}",
                _stop_blind_retry,
                unique_id=f"{_HANDLER_ID}-{operation}",
            )
    _in_flight.active = True
    try:
        yield
    finally:
        _in_flight.active = False


def pause_before(attempt: int) -> None:
    """Back off before send number ``attempt + 1``: full jitter, 0.1 s doubling."""
    time.sleep(random.uniform(0, 0.1 * 2**attempt))
