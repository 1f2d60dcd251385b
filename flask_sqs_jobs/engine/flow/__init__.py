"""Flow control: limits that hold across every worker process."""

from __future__ import annotations

from ._limit_specs import ConcurrencyLimit
from ._limit_specs import RateLimit

__all__ = ["ConcurrencyLimit", "RateLimit"]
