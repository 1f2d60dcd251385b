"""The limit gate: what a job takes before its handler starts, and gives back."""

from __future__ import annotations

import time
import typing as t

import pytest
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine.flow import batch_ceiling
from flask_sqs_jobs.engine.flow import ConcurrencyLimit
from flask_sqs_jobs.engine.flow import JobLimited
from flask_sqs_jobs.engine.flow import Limit
from flask_sqs_jobs.engine.flow import LimitGate
from flask_sqs_jobs.engine.flow import Permits
from flask_sqs_jobs.engine.flow import RateLimit
from flask_sqs_jobs.engine.flow import TokenCache


class FakeLimits:
    """A store whose answers the test sets; it notes every call."""

    def __init__(self, *, tokens: float = 0.0, free: bool = True) -> None:
        self.tokens, self.free = tokens, free
        self.calls: list[tuple[t.Any, ...]] = []
        self.fail: Exception | None = None

    def take_token(self, name: str, key: str, limit: int, per: float) -> float:
        self.calls.append(("take", name, key))
        if self.fail is not None:
            raise self.fail
        return self.tokens

    def take_tokens(
        self, name: str, key: str, limit: int, per: float, most: int
    ) -> tuple[int, float]:
        self.calls.append(("take", name, key, most))
        if self.fail is not None:
            raise self.fail
        return (0, self.tokens) if self.tokens else (most, 0.0)

    def acquire_permit(
        self, name: str, key: str, limit: int, holder: str, lease_seconds: float
    ) -> int | None:
        self.calls.append(("acquire", name, key, lease_seconds))
        return 0 if self.free else None

    def renew_permit(
        self, name: str, key: str, slot: int, holder: str, lease_seconds: float
    ) -> bool:
        self.calls.append(("renew", name, key, lease_seconds))
        return True

    def release_permit(self, name: str, key: str, slot: int, holder: str) -> None:
        self.calls.append(("release", name, key))


def job(**payload: t.Any) -> Job:
    return Job(job_type="charge", payload=payload, queue="default", job_id="j1")


def tenant(payload: t.Mapping[str, t.Any]) -> str:
    return str(payload["tenant"])


def test_permits_are_taken_before_tokens_and_kept_for_the_handler() -> None:
    store = FakeLimits()
    limits: list[Limit] = [RateLimit("api", 5), ConcurrencyLimit("db", 3, key=tenant)]
    errors: list[BaseException] = []

    entered = LimitGate(store).enter(job(tenant="t1"), limits, 30, errors.append)

    assert isinstance(entered, Permits)
    assert store.calls == [("acquire", "db", "t1", 30), ("take", "api", "")]
    entered.renew(12)
    entered.release()
    assert store.calls[-1] == ("renew", "db", "t1", 12)
    # The returned permit waits a moment for the worker's next job, then goes back.
    assert eventually(lambda: store.calls[-1] == ("release", "db", "t1"))
    assert errors == []


def test_the_next_job_takes_the_permit_the_last_one_returned() -> None:
    store = FakeLimits()
    gate = LimitGate(store)
    limits: list[Limit] = [ConcurrencyLimit("db", 3, key=tenant)]

    first = gate.enter(job(tenant="t1"), limits, 30, lambda exc: None)
    assert isinstance(first, Permits)
    first.release()
    second = gate.enter(job(tenant="t1"), limits, 30, lambda exc: None)
    assert isinstance(second, Permits)
    other = gate.enter(job(tenant="t2"), limits, 30, lambda exc: None)
    assert isinstance(other, Permits)

    # One acquire for t1's two jobs, one for t2's.
    assert [c for c in store.calls if c[0] == "acquire"] == [
        ("acquire", "db", "t1", 30),
        ("acquire", "db", "t2", 30),
    ]
    second.release()
    other.release()
    assert eventually(lambda: [c[0] for c in store.calls].count("release") == 2)


def test_a_fast_rate_limit_takes_tokens_in_batches_for_the_next_jobs() -> None:
    store = FakeLimits()
    now = [100.0]
    tokens = TokenCache(store, clock=lambda: now[0])
    limit = RateLimit("api", 10_000, per=1)

    assert [tokens.take(limit, "") for _ in range(40)] == [0.0] * 40
    asked = [call[3] for call in store.calls]
    # Batches that double (1, 2, 4, ... up to the ceiling): few store calls.
    assert len(asked) < 10
    assert sum(asked) >= 40
    assert max(asked) <= batch_ceiling(limit)

    calls = len(store.calls)
    now[0] += 0.06  # past the hold of every batch: its spare tokens are dropped
    assert tokens.take(limit, "") == 0.0
    assert len(store.calls) > calls


def test_a_slow_rate_limit_is_taken_one_token_a_job() -> None:
    store = FakeLimits()
    tokens = TokenCache(store)
    for _ in range(3):
        assert tokens.take(RateLimit("api", 5, per=1), "") == 0.0
    assert store.calls == [("take", "api", "")] * 3


def eventually(check: t.Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_a_refused_token_gives_the_permits_back_and_limits_the_job() -> None:
    store = FakeLimits(tokens=0.5)
    limits: list[Limit] = [
        ConcurrencyLimit("db", 3, lease_seconds=90),
        RateLimit("api", 5),
    ]

    entered = LimitGate(store).enter(job(), limits, 30, lambda exc: None)

    assert isinstance(entered, JobLimited)
    assert entered.limit == "api"
    assert 1 <= entered.delay_seconds <= 3
    assert store.calls[0] == ("acquire", "db", "", 90)
    assert store.calls[-1] == ("release", "db", "")


def test_no_free_permit_limits_the_job_without_taking_a_token() -> None:
    store = FakeLimits(free=False)
    limits: list[Limit] = [RateLimit("api", 5), ConcurrencyLimit("db", 3)]

    entered = LimitGate(store).enter(job(), limits, 30, lambda exc: None)

    assert isinstance(entered, JobLimited)
    assert entered.limit == "db"
    assert [call[0] for call in store.calls] == ["acquire"]


def test_a_failing_store_is_reported_and_gives_the_permits_back() -> None:
    store = FakeLimits()
    store.fail = ConnectionError("store down")
    errors: list[BaseException] = []
    limits: list[Limit] = [ConcurrencyLimit("db", 3), RateLimit("api", 5)]

    entered = LimitGate(store).enter(job(), limits, 30, errors.append)

    assert isinstance(entered, ConnectionError)
    assert errors == [entered]
    assert store.calls[-1] == ("release", "db", "")


def test_a_key_that_is_not_a_str_is_an_error_naming_the_limit() -> None:
    limits = [RateLimit("api", 5, key=lambda payload: payload["n"])]

    entered = LimitGate(FakeLimits()).enter(job(n=1), limits, 30, lambda exc: None)

    assert isinstance(entered, ValueError)
    assert "'api'" in str(entered)


@pytest.mark.parametrize("wait", [0.0, 0.02, 3.0])
def test_the_delay_is_at_least_the_wait_and_spread(wait: float) -> None:
    store = FakeLimits(tokens=wait or 1e-6)
    delays = set()
    for _ in range(200):
        entered = LimitGate(store).enter(
            job(), [RateLimit("api", 5)], 30, lambda exc: None
        )
        assert isinstance(entered, JobLimited)
        delays.add(entered.delay_seconds)
    assert min(delays) >= max(1, wait)
    assert max(delays) <= 2 * max(1, wait) + 1
    assert len(delays) > 1
