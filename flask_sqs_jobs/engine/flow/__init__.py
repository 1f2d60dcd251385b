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
from ._permit_pool import PermitPool
from ._permit_pool import PooledPermit
from ._token_bucket import batch_ceiling
from ._token_bucket import BucketState
from ._token_bucket import capacity
from ._token_bucket import hold_seconds
from ._token_bucket import take_token
from ._token_bucket import TakeResult
from ._token_cache import TokenCache

__all__ = [
    "MAX_LIMIT_KEY_LENGTH",
    "BucketState",
    "CancelWatch",
    "ConcurrencyLimit",
    "JobLimited",
    "Limit",
    "LimitGate",
    "LimitStore",
    "PermitPool",
    "Permits",
    "PooledPermit",
    "RateLimit",
    "TakeResult",
    "TokenCache",
    "batch_ceiling",
    "capacity",
    "Tombstones",
    "check_limits",
    "hold_seconds",
    "take_token",
]
