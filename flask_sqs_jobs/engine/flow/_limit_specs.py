"""What a task or handler declares with ``limits=[...]``: the values, checked."""

from __future__ import annotations

import dataclasses
import math
import typing as t

#: Derives the key a limit is counted per from a job's payload.
LimitKey = t.Callable[[t.Mapping[str, t.Any]], str]


#: The longest name a limit may have (the stores' column for it).
MAX_LIMIT_NAME_LENGTH = 128


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(
            f"{kind} needs a non-empty name (got {name!r}); it names the limit in the"
            " store and in sqs_jobs_limited_total{limit}."
        )
    if len(name) > MAX_LIMIT_NAME_LENGTH:
        raise ValueError(
            f"{kind} name is {len(name)} characters long; at most"
            f" {MAX_LIMIT_NAME_LENGTH} fit in the store."
        )


def _check_limit(kind: str, name: str, limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{kind} {name!r}: limit must be an int >= 1 (got {limit!r}).")


def _check_key(kind: str, name: str, key: LimitKey | None) -> None:
    if key is not None and not callable(key):
        raise ValueError(
            f"{kind} {name!r}: key must be a callable taking the payload (got {key!r})."
        )


@dataclasses.dataclass(frozen=True)
class RateLimit:
    """Starts across every worker follow one token bucket of ``limit`` tokens
    refilled evenly over ``per`` seconds (per key value when ``key`` is given)."""

    name: str
    limit: int
    per: float = 1.0
    key: LimitKey | None = None

    def __post_init__(self) -> None:
        _check_name("RateLimit", self.name)
        _check_limit("RateLimit", self.name, self.limit)
        per = self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)):
            raise ValueError(
                f"RateLimit {self.name!r}: per must be seconds (got {per!r})."
            )
        if not math.isfinite(per) or per <= 0:
            raise ValueError(
                f"RateLimit {self.name!r}: per must be a finite number of seconds > 0"
                f" (got {per!r})."
            )
        _check_key("RateLimit", self.name, self.key)

    @property
    def refill_per_second(self) -> float:
        """Tokens the bucket gains each second: the long-run start rate."""
        return self.limit / self.per


@dataclasses.dataclass(frozen=True)
class ConcurrencyLimit:
    """At most ``limit`` jobs running at once across every worker (per key
    value when ``key`` is given); a permit is a lease of ``lease_seconds``."""

    name: str
    limit: int
    key: LimitKey | None = None
    lease_seconds: float | None = None

    def __post_init__(self) -> None:
        _check_name("ConcurrencyLimit", self.name)
        _check_limit("ConcurrencyLimit", self.name, self.limit)
        _check_key("ConcurrencyLimit", self.name, self.key)
        lease = self.lease_seconds
        if lease is not None and (
            isinstance(lease, bool)
            or not isinstance(lease, (int, float))
            or not math.isfinite(lease)
            or lease <= 0
        ):
            raise ValueError(
                f"ConcurrencyLimit {self.name!r}: lease_seconds must be None or"
                f" seconds > 0 (got {lease!r})."
            )
