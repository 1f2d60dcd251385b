from __future__ import annotations

import typing as t

import pytest
from flask_sqs_jobs.engine.flow import ConcurrencyLimit
from flask_sqs_jobs.engine.flow import RateLimit


def test_rate_limit_refill_rate() -> None:
    assert RateLimit("stripe", 100, per=2).refill_per_second == 50


def test_concurrency_limit_key_is_kept() -> None:
    def by_tenant(payload: t.Mapping[str, t.Any]) -> str:
        return str(payload["tenant"])

    limit = ConcurrencyLimit("tenants", 5, key=by_tenant)
    assert limit.key is not None
    assert limit.key({"tenant": "a"}) == "a"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RateLimit("", 1), "non-empty name"),
        (lambda: RateLimit("x", 0), "limit must be an int >= 1"),
        (lambda: RateLimit("x", True), "limit must be an int >= 1"),
        (lambda: RateLimit("x", 1, per=0), "per must be a finite"),
        (lambda: RateLimit("x", 1, per=float("inf")), "per must be a finite"),
        (lambda: RateLimit("x", 1, key="tenant"), "key must be a callable"),  # type: ignore[arg-type]
        (lambda: ConcurrencyLimit("x", -1), "limit must be an int >= 1"),
        (lambda: ConcurrencyLimit("x", 1, lease_seconds=0), "lease_seconds must be"),
        (lambda: ConcurrencyLimit("x" * 129, 1), "at most 128"),
    ],
)
def test_bad_values_are_refused_clearly(
    make: t.Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make()
