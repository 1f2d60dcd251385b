"""The run-phase step before a handler starts: take what its limits ask for.

For each job whose handler declares ``limits=[...]``, the job guard asks the
gate before the handler runs. Concurrency permits are taken first (they can
be given back), then one token of each rate limit; when any is refused, the
permits already taken are given back and the job is :class:`JobLimited`: it
does not run now and comes back after a jittered delay (outcome ``limited``,
not a failed attempt). A job that starts holds its permits until its handler
returns (and the worker keeps them a moment for its next job, see
``_permit_pool.py``); the heartbeat renews them with each visibility
extension, and a dead worker's come back when their lease ends.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import math
import random
import typing as t

import structlog

from ..model import Job
from ..model import loggable_text
from ..model import RetryJob
from ._limit_specs import ConcurrencyLimit
from ._limit_specs import RateLimit
from ._limit_store import LimitStore
from ._limit_store import MAX_LIMIT_KEY_LENGTH
from ._permit_pool import PermitPool
from ._permit_pool import PooledPermit
from ._token_cache import TokenCache

log = structlog.get_logger(__name__)

#: A limit a handler may declare.
Limit: t.TypeAlias = RateLimit | ConcurrencyLimit
#: Reports a failed call on the store (to ``worker_error``, kind ``"store"``).
StoreErrors: t.TypeAlias = cabc.Callable[[BaseException], None]
#: The shortest and longest wait of a limited job, in seconds.
MIN_LIMITED_DELAY = 1
MAX_LIMITED_DELAY = 900


class JobLimited(RetryJob):
    """The job may not start now: ``limit`` refused it; it comes back later."""

    def __init__(self, limit: str, delay_seconds: int) -> None:
        super().__init__(delay_seconds)
        #: The name of the limit that refused the job.
        self.limit = limit

    def __str__(self) -> str:
        return f"limited by {self.limit!r}; back in {self.delay_seconds} s"


def check_limits(owner: str, limits: object) -> tuple[Limit, ...]:
    """``limits`` as a tuple of limits, or a ValueError saying what is wrong."""
    if limits is None:
        return ()
    if isinstance(limits, RateLimit | ConcurrencyLimit) or not isinstance(
        limits, cabc.Iterable
    ):
        raise ValueError(
            f"{owner}: limits must be a list of RateLimit and ConcurrencyLimit"
            f" (got {limits!r}); write limits=[RateLimit(...)]"
        )
    found = tuple(limits)
    for limit in found:
        if not isinstance(limit, RateLimit | ConcurrencyLimit):
            raise ValueError(
                f"{owner}: limits holds {limit!r}, which is neither a RateLimit"
                " nor a ConcurrencyLimit"
            )
    names = [limit.name for limit in found]
    if len(set(names)) != len(names):
        raise ValueError(f"{owner}: each limit needs a name of its own (got {names})")
    return found


def jittered_delay(wait: float) -> int:
    """Seconds a limited job waits: at least ``wait`` (and a second), at most
    twice that and a second, so that jobs refused together come back spread."""
    base = min(MAX_LIMITED_DELAY, max(MIN_LIMITED_DELAY, math.ceil(wait)))
    return min(MAX_LIMITED_DELAY, random.randint(base, 2 * base + 1))


def key_value(limit: Limit, job: Job) -> str:
    """The key ``limit`` is counted per for ``job`` ("" without a ``key``).

    :raises ValueError: the key function did not return a str.
    """
    if limit.key is None:
        return ""
    value = limit.key(job.payload)
    if not isinstance(value, str):
        raise ValueError(
            f"the key of limit {limit.name!r} must return a str; got"
            f" {type(value).__name__}"
        )
    return value[:MAX_LIMIT_KEY_LENGTH]


@dataclasses.dataclass
class Permits:
    """The concurrency permits one running job holds."""

    pool: PermitPool
    report: StoreErrors
    #: Each permit and its lease seconds (None: the message's extension).
    held: list[tuple[PooledPermit, float | None]] = dataclasses.field(
        default_factory=list
    )

    def renew(self, seconds: int) -> None:
        """Extend every permit with the message (on the heartbeat's pool)."""
        for permit, lease in self.held:
            try:
                renewed = self.pool.renew(permit, lease or seconds)
            except Exception as exc:
                log.warning("limit_renew_failed", limit=permit.name, error=_shown(exc))
                self.report(exc)
                continue
            if not renewed:
                log.warning(
                    "limit_renew_failed",
                    limit=permit.name,
                    error="the permit is no longer held by this job",
                )

    def release(self, keep: bool = True) -> None:
        """Give every permit back (kept a moment for the worker's next job
        unless ``keep`` is false); a failure leaves it to its lease's end."""
        held, self.held = self.held, []
        for permit, _ in held:
            try:
                self.pool.release(permit, keep)
            except Exception as exc:
                shown = _shown(exc)
                log.warning("limit_release_failed", limit=permit.name, error=shown)
                self.report(exc)


class LimitGate:
    """Take a job's limits before its handler starts.

    One per worker, shared by the slot threads; between jobs it keeps only
    the tokens of fast rate limits taken ahead (:class:`TokenCache`) and the
    permits its jobs just returned (:class:`PermitPool`).
    :param store: the store's limits (``store.limits()``).
    """

    def __init__(self, store: LimitStore) -> None:
        self._store = store
        self._tokens = TokenCache(store)
        self._permits = PermitPool(store)

    def enter(
        self,
        job: Job,
        limits: cabc.Sequence[Limit],
        lease_seconds: float,
        report: StoreErrors,
    ) -> Permits | JobLimited | Exception:
        """The permits ``job`` now holds, the :class:`JobLimited` that stops
        it, or the error that kept the store from answering (the job is then
        retried; its permits are given back)."""
        permits = Permits(self._permits, report)
        try:
            refused = self._take(job, limits, lease_seconds, permits)
        except Exception as exc:
            log.warning("limit_check_failed", error=_shown(exc))
            report(exc)
            permits.release(keep=False)
            return exc
        if refused is None:
            return permits
        permits.release(keep=False)
        return refused

    def _take(
        self,
        job: Job,
        limits: cabc.Sequence[Limit],
        lease_seconds: float,
        permits: Permits,
    ) -> JobLimited | None:
        for limit in limits:
            if isinstance(limit, ConcurrencyLimit):
                key = key_value(limit, job)
                lease = limit.lease_seconds
                permit = self._permits.acquire(
                    limit.name, key, limit.limit, lease or lease_seconds
                )
                if permit is None:
                    return JobLimited(limit.name, jittered_delay(0))
                permits.held.append((permit, lease))
        for limit in limits:
            if isinstance(limit, RateLimit):
                key = key_value(limit, job)
                wait = self._tokens.take(limit, key)
                if wait > 0:
                    return JobLimited(limit.name, jittered_delay(wait))
        return None


def _shown(exc: BaseException) -> str:
    """A store's error for a log line: it may quote a key, which is untrusted."""
    return loggable_text(str(exc), 1000)
