"""Flow control: limits that hold across every worker process."""

from __future__ import annotations

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
    "ConcurrencyLimit",
    "JobLimited",
    "Limit",
    "LimitGate",
    "LimitStore",
    "Permits",
    "RateLimit",
    "TakeResult",
    "check_limits",
    "take_token",
]
