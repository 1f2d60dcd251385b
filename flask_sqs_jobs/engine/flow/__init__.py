"""Flow control: limits that hold across every worker process."""

from __future__ import annotations

from ._limit_specs import ConcurrencyLimit
from ._limit_specs import RateLimit
from ._token_bucket import BucketState
from ._token_bucket import take_token
from ._token_bucket import TakeResult

__all__ = ["BucketState", "ConcurrencyLimit", "RateLimit", "TakeResult", "take_token"]
