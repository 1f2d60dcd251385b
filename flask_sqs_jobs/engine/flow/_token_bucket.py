"""The token-bucket arithmetic every store applies inside its conditional write.

A worker may take a rate limit's tokens a few at a time and spend them itself
(:mod:`._token_cache`): a token taken at ``t`` starts a job by ``t + hold``
or is dropped. So that any window of ``per`` seconds still holds at most
``2 * limit`` starts, such a limit's bucket holds ``hold * limit / per``
tokens fewer (at most a twentieth of ``limit``); a limit too slow for
batches (fewer than two tokens per ``hold``) keeps its full bucket and is
taken one token at a time.
"""

from __future__ import annotations

import dataclasses
import math

from ._limit_specs import RateLimit

#: The longest a worker keeps a token it took ahead, in seconds.
MAX_HOLD_SECONDS = 0.1
#: The most tokens one take asks for.
MAX_BATCH = 32


@dataclasses.dataclass(frozen=True)
class BucketState:
    """A bucket as stored: tokens left at ``updated_at`` (seconds, store clock)."""

    tokens: float
    updated_at: float


@dataclasses.dataclass(frozen=True)
class TakeResult:
    """What one take decided: the state to write and, when refused, the wait."""

    taken: bool
    state: BucketState
    retry_after: float
    #: How many tokens were taken (0 when refused).
    count: int = 1


def hold_seconds(limit: RateLimit) -> float:
    """How long a token taken ahead may wait to be spent (0: never taken ahead)."""
    hold = min(limit.per / 20, MAX_HOLD_SECONDS)
    return hold if limit.refill_per_second * hold >= 2 else 0.0


def batch_ceiling(limit: RateLimit) -> int:
    """The most tokens one take of ``limit`` asks for (1: no batches)."""
    hold = hold_seconds(limit)
    if not hold:
        return 1
    return min(MAX_BATCH, math.floor(limit.refill_per_second * hold))


def capacity(limit: RateLimit) -> float:
    """The tokens ``limit``'s bucket holds when full (see the module's text)."""
    return limit.limit - limit.refill_per_second * hold_seconds(limit)


def take_token(
    limit: RateLimit, state: BucketState | None, now: float, most: int = 1
) -> TakeResult:
    """Refill ``state`` up to ``now`` and take up to ``most`` tokens, if one is there.

    A missing bucket starts full. A clock that went backwards refills nothing.
    """
    full = capacity(limit)
    if state is None:
        tokens = full
    else:
        elapsed = max(0.0, now - state.updated_at)
        tokens = min(full, state.tokens + elapsed * limit.refill_per_second)
    if tokens >= 1.0:
        count = min(max(1, most), math.floor(tokens))
        return TakeResult(True, BucketState(tokens - count, now), 0.0, count)
    wait = (1.0 - tokens) / limit.refill_per_second
    return TakeResult(False, BucketState(tokens, now), wait, 0)
