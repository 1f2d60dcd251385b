"""The SQL idempotency keys, on SQLite and PostgreSQL, with a clock of the test's."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.engine.model._idempotency_keys import Claim
from flask_sqs_jobs.engine.model._idempotency_keys import ClaimState
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.sql import _idempotency as _sql_idempotency
from flask_sqs_jobs.store.sql._idempotency import IdempotencyKeyLost
from flask_sqs_jobs.store.sql._idempotency import SQLIdempotencyKeys
from flask_sqs_jobs.store.sql._tables import idempotency

from tests.engine.helpers import WAIT


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def store(sql_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return sql_store


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(_sql_idempotency, "_now", clock)
    return clock


@pytest.fixture
def keys(store: SQLAlchemyStore, clock: Clock) -> SQLIdempotencyKeys:
    return store.idempotency_keys()


def claim(keys: SQLIdempotencyKeys, payload_hash: str = "h1", job: str = "j1") -> Claim:
    return keys.claim("k", payload_hash=payload_hash, job_id=job, lease_seconds=30)


def test_a_free_key_is_claimed_then_completed_with_its_result(
    keys: SQLIdempotencyKeys,
) -> None:
    first = claim(keys)
    assert first.state is ClaimState.CLAIMED
    assert first.token
    keys.complete("k", first.token, result={"charged": 5}, ttl_seconds=60)
    again = claim(keys, job="j2")
    assert again.state is ClaimState.COMPLETED
    assert again.holder_job_id == "j1"
    assert again.result == {"charged": 5}


def test_a_held_key_is_in_progress_until_its_lease_ends(
    keys: SQLIdempotencyKeys, clock: Clock
) -> None:
    first = claim(keys)
    clock.advance(10)
    second = claim(keys, job="j2")
    assert second.state is ClaimState.IN_PROGRESS
    assert second.retry_after_seconds == pytest.approx(20)
    assert second.holder_job_id == "j1"
    clock.advance(20)
    third = claim(keys, job="j3")
    assert third.state is ClaimState.CLAIMED
    assert third.token != first.token
    # The first holder lost the key: it can neither renew nor complete it.
    assert first.token is not None
    assert keys.renew("k", first.token, 30) is False
    with pytest.raises(IdempotencyKeyLost, match="no longer held"):
        keys.complete("k", first.token, result=None, ttl_seconds=60)


def test_renewing_moves_the_lease_end(keys: SQLIdempotencyKeys, clock: Clock) -> None:
    first = claim(keys)
    assert first.token is not None
    clock.advance(25)
    assert keys.renew("k", first.token, 30) is True
    clock.advance(25)
    assert claim(keys, job="j2").state is ClaimState.IN_PROGRESS


def test_another_payload_is_a_conflict_while_held_or_completed(
    keys: SQLIdempotencyKeys,
) -> None:
    first = claim(keys)
    held = claim(keys, payload_hash="other", job="j2")
    assert held.state is ClaimState.CONFLICT
    assert held.holder_job_id == "j1"
    assert first.token is not None
    keys.complete("k", first.token, result=None, ttl_seconds=60)
    done = claim(keys, payload_hash="other", job="j3")
    assert done.state is ClaimState.CONFLICT
    assert done.holder_job_id == "j1"


def test_a_completed_key_is_forgotten_after_its_ttl(
    keys: SQLIdempotencyKeys, clock: Clock
) -> None:
    first = claim(keys)
    assert first.token is not None
    keys.complete("k", first.token, result=None, ttl_seconds=60)
    clock.advance(59)
    assert claim(keys, job="j2").state is ClaimState.COMPLETED
    clock.advance(1)
    # Expired, even for another payload: the key is free again.
    assert claim(keys, payload_hash="other", job="j3").state is ClaimState.CLAIMED


def test_relinquish_frees_the_key_only_for_its_holder(keys: SQLIdempotencyKeys) -> None:
    first = claim(keys)
    assert first.token is not None
    keys.relinquish("k", "not-the-token")
    assert claim(keys, job="j2").state is ClaimState.IN_PROGRESS
    keys.relinquish("k", first.token)
    assert claim(keys, job="j3").state is ClaimState.CLAIMED


def test_forget_expired_deletes_only_expired_completions(
    store: SQLAlchemyStore, keys: SQLIdempotencyKeys, clock: Clock
) -> None:
    for key in ("a", "b"):
        token = keys.claim(key, payload_hash="h", job_id=key, lease_seconds=30).token
        assert token is not None
        keys.complete(key, token, result=None, ttl_seconds=60 if key == "a" else 600)
    keys.claim("c", payload_hash="h", job_id="c", lease_seconds=30)
    clock.advance(61)
    assert keys.forget_expired() == 1
    with store.engine.connect() as connection:
        left = connection.execute(sa.select(idempotency.c.key)).scalars().all()
    assert sorted(left) == ["b", "c"]


def test_completing_in_a_session_commits_with_it_or_not_at_all(
    store: SQLAlchemyStore, keys: SQLIdempotencyKeys
) -> None:
    first = claim(keys)
    assert first.token is not None
    with store.session() as session:
        keys.complete("k", first.token, result=1, ttl_seconds=60, session=session)
        session.rollback()
    assert claim(keys, job="j2").state is ClaimState.IN_PROGRESS
    with store.session() as session:
        keys.complete("k", first.token, result=1, ttl_seconds=60, session=session)
        session.commit()
    assert claim(keys, job="j2").state is ClaimState.COMPLETED


def test_racing_claims_give_the_key_to_exactly_one(store: SQLAlchemyStore) -> None:
    keys = store.idempotency_keys()
    racers = 8
    barrier = threading.Barrier(racers, timeout=WAIT)
    states: list[ClaimState] = []
    lock = threading.Lock()

    def race(index: int) -> None:
        barrier.wait()
        found = keys.claim(
            "raced", payload_hash="h", job_id=f"j{index}", lease_seconds=30
        )
        with lock:
            states.append(found.state)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(s.value for s in states) == ["claimed"] + ["in_progress"] * (
        racers - 1
    )
