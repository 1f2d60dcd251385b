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
import weakref

import structlog
from botocore.exceptions import ClientError

from ._errors import may_have_been_applied

log = structlog.get_logger(__name__)

#: Sends of one offloaded request, the first included.
ATTEMPTS = 3

_OPERATIONS = ("SendMessage", "SendMessageBatch")
_HANDLER_ID = "flask-sqs-jobs-single-copy"
_in_flight = threading.local()
#: The clients' event emitters that have the handler already.
_registered: weakref.WeakSet[object] = weakref.WeakSet()
_registering = threading.Lock()

_R = t.TypeVar("_R")


class ReuploadFailed(Exception):
    """The new objects for a resend could not be written (``__cause__``: S3's
    error); the request is not sent again, and the earlier copy may be on SQS."""


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


def send_fresh_copies(
    client: object,
    send: cabc.Callable[[], _R],
    *,
    reupload: cabc.Callable[[], None],
    refused: cabc.Callable[[], None],
    sqs_queue: str,
) -> _R:
    """``send()`` an offloaded request, at most :data:`ATTEMPTS` times.

    The one policy of the single send and of each SendMessageBatch request:
    a send SQS refused (nothing applied) calls ``refused`` (delete the
    objects) and raises; one that may have been applied (its answer lost)
    keeps its objects, backs off, calls ``reupload`` (new objects, a new
    request) and is sent again. The last attempt's error is raised as it
    is; a failed ``reupload`` as :class:`ReuploadFailed`. Each resend is
    logged as ``large_payload_send_retried``.
    """
    attempt = 1
    while True:
        try:
            with single_copy(client):
                return send()
        except Exception as exc:
            applied = may_have_been_applied(exc)
            if not applied:
                refused()
            if not applied or attempt >= ATTEMPTS:
                raise
            log.warning(
                "large_payload_send_retried",
                sqs_queue=sqs_queue,
                attempt=attempt,
                error=str(exc),
            )
        pause_before(attempt)
        attempt += 1
        try:
            reupload()
        except Exception as exc:
            raise ReuploadFailed(f"S3 upload failed: {exc}") from exc


@contextlib.contextmanager
def single_copy(client: object) -> cabc.Iterator[None]:
    """Within the block, this thread's sends on ``client`` are not resent blindly.

    A client without botocore's events (a wrapper) keeps its own retries.
    """
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        _register_once(events)
    _in_flight.active = True
    try:
        yield
    finally:
        _in_flight.active = False


def _register_once(events: t.Any) -> None:
    """Add the handler to a client's events, once per client."""
    try:
        if events in _registered:
            return
    except TypeError:  # not weakly referable: register (idempotent) each time
        pass
    with _registering:
        for operation in _OPERATIONS:
            events.register(
                f"needs-retry.sqs.{operation}",
                _stop_blind_retry,
                unique_id=f"{_HANDLER_ID}-{operation}",
            )
        with contextlib.suppress(TypeError):
            _registered.add(events)


def pause_before(attempt: int) -> None:
    """Back off before send number ``attempt + 1``: full jitter, 0.1 s doubling."""
    time.sleep(random.uniform(0, 0.1 * 2**attempt))
