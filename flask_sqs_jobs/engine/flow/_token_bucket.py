"""The token-bucket arithmetic every store applies inside its conditional write."""

from __future__ import annotations

import dataclasses

from ._limit_specs import RateLimit


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


def take_token(limit: RateLimit, state: BucketState | None, now: float) -> TakeResult:
    """Refill ``state`` up to ``now`` and take one token if one is there.

    A missing bucket starts full. A clock that went backwards refills nothing.
    """
    if state is None:
        tokens = float(limit.limit)
    else:
        elapsed = max(0.0, now - state.updated_at)
        tokens = min(
            float(limit.limit), state.tokens + elapsed * limit.refill_per_second
        )
    if tokens >= 1.0:
        return TakeResult(True, BucketState(tokens - 1.0, now), 0.0)
    wait = (1.0 - tokens) / limit.refill_per_second
    return TakeResult(False, BucketState(tokens, now), wait)
