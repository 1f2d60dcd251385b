"""Flow control: limits that hold across every worker process; cancellation."""

from __future__ import annotations

from ._cancellation import CancelWatch
from ._cancellation import Tombstones
from ._limit_specs import ConcurrencyLimit
from ._limit_specs import RateLimit
from ._token_bucket import BucketState
from ._token_bucket import take_token
from ._token_bucket import TakeResult

__all__ = [
    "BucketState",
    "CancelWatch",
    "ConcurrencyLimit",
    "RateLimit",
    "TakeResult",
    "Tombstones",
    "take_token",
]
