"""What the worker needs from a store to run idempotent handlers.

The engine never imports a database library: a store (``flask_sqs_jobs.store``)
provides an :class:`IdempotencyKeys` implementation, and the worker calls it
around the handler of a job whose type asks for idempotency.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import typing as t
import urllib.parse

from ._exceptions import NonRetryableError
from ._handlers import GLOBAL_SCOPE
from ._handlers import JobHandler
from ._job import Job
from ._job import JSONObject

#: The largest JSON result (UTF-8 bytes) kept with a completed key or a record.
MAX_RESULT_BYTES = 64 * 1024

#: The longest key a key function may return (the key column's width).
MAX_KEY_LENGTH = 255


class ClaimState(enum.Enum):
    """What :meth:`IdempotencyKeys.claim` found."""

    #: The key was free (or its lease had ended): the caller now holds it.
    CLAIMED = "claimed"
    #: The key was completed (and not yet expired): do not run again.
    COMPLETED = "completed"
    #: Another holder's lease is live: try again when it ends.
    IN_PROGRESS = "in_progress"
    #: The key is held or completed for a different payload.
    CONFLICT = "conflict"


@dataclasses.dataclass(frozen=True)
class Claim:
    """The answer of :meth:`IdempotencyKeys.claim`."""

    state: ClaimState
    #: The holder's token (CLAIMED): pass it to renew, complete and relinquish.
    token: str | None = None
    #: Seconds until the other holder's lease ends (IN_PROGRESS).
    retry_after_seconds: float | None = None
    #: The job id that completed or holds the key (COMPLETED, IN_PROGRESS, CONFLICT).
    holder_job_id: str | None = None
    #: The completed run's JSON result (COMPLETED).
    result: t.Any = None


class IdempotencyKeys(t.Protocol):
    """Idempotency keys in a store, each in progress (leased) or completed.

    Every method is safe to call from several processes at once: a key is
    claimed by exactly one caller at a time (a conditional write or a row
    lock). Times are measured by the store's clock where it has one.
    """

    def claim(
        self, key: str, *, payload_hash: str, job_id: str, lease_seconds: float
    ) -> Claim:
        """Claim ``key`` for ``lease_seconds``, unless it is completed or held."""

    def renew(self, key: str, token: str, lease_seconds: float) -> bool:
        """Extend the lease; False when ``token`` no longer holds the key."""

    def complete(
        self,
        key: str,
        token: str,
        *,
        result: t.Any,
        ttl_seconds: float,
        session: t.Any = None,
    ) -> None:
        """Mark the key completed for ``ttl_seconds``, keeping ``result``.

        With ``session`` (a SQLAlchemy session of the store's database), the
        write joins that session's transaction and the caller commits it.
        Raises when ``token`` no longer holds the key: the worker then retries
        the job (and rolls the session back).
        """

    def relinquish(self, key: str, token: str) -> None:
        """Forget an in-progress key held by ``token`` (the handler failed)."""


def payload_fingerprint(payload: JSONObject, job_type: str | None = None) -> str:
    """SHA-256 of the canonical JSON of the job type and payload, to tell a reused key.

    ``job_type`` None (a key shared by every job type on purpose) hashes the
    payload alone. :raises RecursionError: the payload nests deeper than the
    interpreter can encode (the worker decodes nothing that deep).
    """
    import hashlib
    import json

    hashed: object = payload if job_type is None else [job_type, payload]
    canonical = json.dumps(
        hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def key_of(job: Job, handler: JobHandler) -> str:
    """The job's idempotency key: the key function's, or its job id."""
    if handler.idempotency_key is None:
        return t.cast(str, job.job_id)
    try:
        key = handler.idempotency_key(job.payload)
    except Exception as exc:
        raise NonRetryableError(
            f"the idempotency_key function of job type {job.job_type!r} raised"
            f" {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH:
        shown = repr(key)[:80]
        raise NonRetryableError(
            f"the idempotency_key function of job type {job.job_type!r} returned"
            f" {shown}; it must return a non-empty str of at most"
            f" {MAX_KEY_LENGTH} characters"
        )
    return key


def stored_key(job_type: str, key: str, scope: str) -> str:
    """The key as stored: ``<job type>:<key>``, or ``:<key>`` in the global scope.

    The job type is percent-encoded (so it holds no ``:`` and one job type's
    keys never meet another's); a stored key over :data:`MAX_KEY_LENGTH`
    characters becomes ``#`` and the SHA-256 of it, which no other stored key
    starts with.
    """
    namespace = (
        ""
        if scope == GLOBAL_SCOPE
        else urllib.parse.quote(job_type, safe="", errors="surrogatepass")
    )
    stored = f"{namespace}:{key}"
    if len(stored) <= MAX_KEY_LENGTH:
        return stored
    digest = hashlib.sha256(stored.encode("utf-8", "surrogatepass")).hexdigest()
    return f"#{digest}"


def fingerprint_of(job: Job, handler: JobHandler) -> str:
    """The payload's hash, with the job type unless the key is shared on purpose."""
    job_type = None if handler.idempotency_scope == GLOBAL_SCOPE else job.job_type
    try:
        return payload_fingerprint(job.payload, job_type)
    except (RecursionError, TypeError, ValueError) as exc:
        # Unreachable for a decoded body (it is bounded); never a store failure.
        raise NonRetryableError(
            f"the payload of job type {job.job_type!r} cannot be hashed for its"
            f" idempotency key: {type(exc).__name__}"
        ) from exc
