"""Flow control: limits that hold across every worker process; cancellation."""

from __future__ import annotations

from ._cancellation import CancelWatch
from ._cancellation import Tombstones
from ._gate import check_limits
from ._gate import JobLimited
from ._gate import Limit
from ._gate import LimitGate
from ._gate import Permits
from ._limit_specs import ConcurrencyLimit
from ._limit_specs import RateLimit
from ._limit_store import LimitStore
from ._limit_store import MAX_LIMIT_KEY_LENGTH
from ._token_bucket import BucketState
from ._token_bucket import take_token
from ._token_bucket import TakeResult

__all__ = [
    "MAX_LIMIT_KEY_LENGTH",
    "BucketState",
    "CancelWatch",
    "ConcurrencyLimit",
    "JobLimited",
    "Limit",
    "LimitGate",
    "LimitStore",
    "Permits",
    "RateLimit",
    "TakeResult",
    "Tombstones",
    "check_limits",
    "take_token",
]
