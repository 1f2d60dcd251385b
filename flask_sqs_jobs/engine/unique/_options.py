"""What ``unique=``, ``unique_key=``, ``debounce=`` and their options ask for, checked.

:func:`read_unique` takes these options out of an enqueue's keyword
arguments and checks them once, for every way of producing a job (the
produce pipeline's prepare step calls it); what comes out is a
:class:`UniqueOptions`, or None for a job that asked for none of them.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t

from ..model import is_finite_number
from ..model import JOB_TYPE_SCOPE
from ..model import JSONObject
from ..model import payload_fingerprint
from ..model import SQSJobsError
from ..model import stored_key

#: How long a unique job's key is held at most, by default (one hour).
DEFAULT_UNIQUE_FOR_SECONDS = 3600.0
#: The longest ``unique_for`` and ``debounce`` (the longest deferral, 365 days).
MAX_UNIQUE_SECONDS = 365 * 24 * 3600.0
#: The longest ``unique_key`` (the key column's width, before namespacing).
MAX_UNIQUE_KEY_LENGTH = 200
STARTED = "started"
FINISHED = "finished"
SKIP = "skip"
RAISE = "raise"

#: The enqueue options read here, taken out before the send options are checked.
UNIQUE_OPTION_NAMES = (
    "unique",
    "unique_key",
    "unique_for",
    "unique_until",
    "on_duplicate",
    "debounce",
)

#: The message of every unique or debounced enqueue made without a store.
NEEDS_A_STORE = (
    "unique jobs need a job store to hold their keys: set SQS_JOBS_STORE_URL (e.g."
    " 'sqlite:///instance/jobs.db' or 'postgresql+psycopg://...') or pass"
    " SQSJobs(store=...); a QueueGroup of its own takes a store's unique_keys()"
    " through use_unique_keys(group, keys)"
)


class DuplicateJobError(SQSJobsError):
    """A unique job's key is held by another job (``on_duplicate="raise"``).

    Nothing was sent or written; :attr:`job_id` is the id of the job holding
    the key.
    """

    def __init__(self, key: str, job_id: str) -> None:
        #: The job that holds the key.
        self.job_id = job_id
        #: The key as stored (``<job type>:<key>``).
        self.key = key
        super().__init__(
            f"a job with the same unique key is already queued or running (job"
            f" {job_id}); nothing was sent. Pass on_duplicate='skip' to get that"
            " job back instead of this error"
        )


class HolderJobId(str):
    """The id of the job holding a unique key, returned in a duplicate's place.

    A ``str`` like any id an enqueue returns; its type tells the task layer
    that nothing was sent (``EnqueuedJob.duplicate``).
    """

    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class UniqueOptions:
    """One job's checked uniqueness or debounce options.

    Built by :func:`read_unique` only. ``key`` is None for ``unique=True``
    (the key is then the job type and the payload, see :func:`key_for`).
    """

    key: str | None
    for_seconds: float = DEFAULT_UNIQUE_FOR_SECONDS
    until: str = STARTED
    on_duplicate: str = SKIP
    #: Seconds after the last enqueue with the key that the job is sent, or None.
    debounce: float | None = None

    def key_for(self, job_type: str, payload: JSONObject) -> str:
        """The key as stored: ``<job type>:<key>``, the job type percent-encoded.

        ``unique=True`` keys on the SHA-256 of the canonical JSON of the job
        type and the payload (that of idempotency keys), so two enqueues with
        equal payloads (in any key order) share a key.
        """
        given = self.key
        if given is None:
            given = "payload:" + payload_fingerprint(payload, job_type)
        return stored_key(job_type, given, JOB_TYPE_SCOPE)


def read_unique(options: dict[str, t.Any]) -> UniqueOptions | None:
    """Take the uniqueness options out of ``options``; check them.

    None when the job asks for neither ``unique`` nor ``unique_key`` nor
    ``debounce`` (and sets none of their options, which alone are refused).

    :raises TypeError, ValueError: an option is wrong; the message names it
        and what to pass instead.
    """
    given = {name: options.pop(name, None) for name in UNIQUE_OPTION_NAMES}
    unique, key, debounce = given["unique"], given["unique_key"], given["debounce"]
    if unique not in (None, False, True):
        raise TypeError(f"unique must be True or False; got {type(unique).__name__}")
    if key is not None and (not isinstance(key, str) or not key):
        raise TypeError("unique_key must be a non-empty str (or None)")
    if key is not None and len(key) > MAX_UNIQUE_KEY_LENGTH:
        raise ValueError(
            f"unique_key is {len(key)} characters; at most {MAX_UNIQUE_KEY_LENGTH}"
            " are allowed (hash a longer one yourself)"
        )
    if debounce is not None and key is None:
        raise ValueError(
            "debounce= needs unique_key=: the key names the jobs that debounce"
            " one another"
        )
    if not unique and key is None:
        extra = [n for n in ("unique_for", "unique_until", "on_duplicate") if given[n]]
        if extra:
            raise ValueError(
                f"{', '.join(extra)} only applies to unique jobs; add unique=True"
                " or unique_key=..."
            )
        return None
    return UniqueOptions(
        key=key,
        for_seconds=_seconds("unique_for", given["unique_for"])
        or DEFAULT_UNIQUE_FOR_SECONDS,
        until=_choice("unique_until", given["unique_until"], (STARTED, FINISHED)),
        on_duplicate=_choice("on_duplicate", given["on_duplicate"], (SKIP, RAISE)),
        debounce=_seconds("debounce", debounce),
    )


def _seconds(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not is_finite_number(value):
        raise TypeError(f"{name} must be a number of seconds; got {value!r}")
    seconds = float(t.cast(float, value))
    if not 0 < seconds <= MAX_UNIQUE_SECONDS or math.isnan(seconds):
        raise ValueError(
            f"{name} must be above 0 and at most {MAX_UNIQUE_SECONDS:.0f} seconds"
            f" (365 days); got {value!r}"
        )
    return seconds


def _choice(name: str, value: object, allowed: tuple[str, str]) -> str:
    if value is None:
        return allowed[0]
    if value not in allowed:
        raise ValueError(
            f"{name} must be {allowed[0]!r} or {allowed[1]!r}; got {value!r}"
        )
    return value
