"""Job ids: set at enqueue, carried in the body, kept across every re-send."""

from __future__ import annotations

import re
import typing as t
import uuid

from .untrusted import loggable_text

#: The longest job id accepted.
MAX_JOB_ID_LENGTH = 128

_JOB_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def new_job_id() -> str:
    """Return a fresh random job id (32 lowercase hex digits)."""
    return uuid.uuid4().hex


def is_job_id(value: object) -> bool:
    """Whether ``value`` is a valid job id: 1-128 of ``A-Za-z0-9_.:-``."""
    return isinstance(value, str) and _JOB_ID.fullmatch(value) is not None


def check_job_id(value: object) -> str:
    """Return the caller's ``job_id``, or a fresh one for None.

    :raises TypeError: not a str (nor None).
    :raises ValueError: not 1-128 characters of ``A-Za-z0-9_.:-``.
    """
    if value is None:
        return new_job_id()
    if not isinstance(value, str):
        raise TypeError(f"job_id must be a str or None; got {type(value).__name__}")
    if not is_job_id(value):
        raise ValueError(
            f"job_id must be 1..{MAX_JOB_ID_LENGTH} characters of A-Za-z0-9_.:-;"
            f" got {len(value)} characters{'' if len(value) > 64 else f' {value!r}'}"
        )
    return value


def received_job_id(sent: object, message_id: str) -> tuple[str, bool]:
    """Return the job id of a received message, and whether ``sent`` was invalid.

    A message without ``job_id`` (another producer) or with one that is not a
    valid id gets its SQS MessageId.
    """
    if is_job_id(sent):
        return t.cast(str, sent), False
    return message_id, sent is not None


def shown_job_id(value: object) -> str:
    """An invalid job id as logged: escaped text, or the JSON type it was."""
    if isinstance(value, str):
        return loggable_text(value, 160)
    return f"<{type(value).__name__}>"
