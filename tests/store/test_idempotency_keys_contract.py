"""The idempotency-key protocol, the same on every store.

Each test runs once per backend in ``BACKENDS``; a store that cannot give
idempotency keys yet is skipped with the reason.
"""

from __future__ import annotations

import collections.abc as cabc
import threading
import time
import typing as t

import pytest
from flask_sqs_jobs.engine.model._idempotency_keys import Claim
from flask_sqs_jobs.engine.model._idempotency_keys import ClaimState
from flask_sqs_jobs.engine.model._idempotency_keys import IdempotencyKeys
from flask_sqs_jobs.engine.model._idempotency_keys import MAX_RESULT_BYTES
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import JobStore

#: DynamoDB runs on moto's server, so with the integration tier.
BACKENDS = [
    pytest.param("dynamodb", marks=pytest.mark.integration),
    "sqlite",
    "postgresql",
]
HASH = "a" * 64
OTHER_HASH = "b" * 64
#: Long enough never to end during a test.
LONG_LEASE = 600.0
#: Ended by the time the next call reaches the store.
SHORT = 0.001


def make_store(backend: str, request: pytest.FixtureRequest) -> JobStore:
    if backend == "dynamodb":
        return DynamoDBStore(
            request.getfixturevalue("table_name"),
            boto_client=request.getfixturevalue("dynamodb_client"),
        )
    from flask_sqs_jobs.store import SQLAlchemyStore

    if not hasattr(SQLAlchemyStore, "idempotency_keys"):
        pytest.skip("SQL idempotency keys not available yet")
    if backend == "sqlite":
        tmp_path = request.getfixturevalue("tmp_path")
        return SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    return SQLAlchemyStore(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=BACKENDS)
def keys(request: pytest.FixtureRequest) -> cabc.Iterator[IdempotencyKeys]:
    store = make_store(request.param, request)
    store.create_tables()
    yield t.cast(t.Any, store).idempotency_keys()
    store.close()


def claim(
    keys: IdempotencyKeys,
    key: str = "charge-1",
    *,
    payload_hash: str = HASH,
    job_id: str = "job-1",
    lease_seconds: float = LONG_LEASE,
) -> Claim:
    return keys.claim(
        key, payload_hash=payload_hash, job_id=job_id, lease_seconds=lease_seconds
    )


def claimed(keys: IdempotencyKeys, **options: t.Any) -> str:
    """Claim the key (it must be free) and return the token."""
    answer = claim(keys, **options)
    assert answer.state is ClaimState.CLAIMED
    assert answer.token
    return answer.token


def claim_within(
    keys: IdempotencyKeys, seconds: float = 10.0, **options: t.Any
) -> Claim:
    """Claim until CLAIMED or ``seconds`` pass: for a lease or a TTL that just ended."""
    deadline = time.monotonic() + seconds
    while True:
        answer = claim(keys, **options)
        if answer.state is ClaimState.CLAIMED or time.monotonic() > deadline:
            return answer


def test_a_free_key_is_claimed(keys: IdempotencyKeys) -> None:
    answer = claim(keys)
    assert answer.state is ClaimState.CLAIMED
    assert answer.token
    assert answer.retry_after_seconds is None


def test_a_held_key_is_in_progress_until_its_lease_ends(keys: IdempotencyKeys) -> None:
    claimed(keys, job_id="job-1", lease_seconds=60)
    answer = claim(keys, job_id="job-2")
    assert answer.state is ClaimState.IN_PROGRESS
    assert answer.token is None
    assert answer.holder_job_id == "job-1"
    assert answer.retry_after_seconds is not None
    assert 0 < answer.retry_after_seconds <= 60


def test_a_completed_key_answers_with_its_result(keys: IdempotencyKeys) -> None:
    token = claimed(keys, job_id="job-1")
    result = {"charge_id": "ch_1", "amount": 1250, "note": "café ✓"}
    keys.complete("charge-1", token, result=result, ttl_seconds=3600)
    answer = claim(keys, job_id="job-2")
    assert answer.state is ClaimState.COMPLETED
    assert answer.result == result
    assert answer.holder_job_id == "job-1"
    assert answer.token is None


@pytest.mark.parametrize("result", [None, "done", [1, 2], "x" * (MAX_RESULT_BYTES - 2)])
def test_any_json_result_up_to_64_kib_is_kept(
    keys: IdempotencyKeys, result: t.Any
) -> None:
    token = claimed(keys)
    keys.complete("charge-1", token, result=result, ttl_seconds=3600)
    answer = claim(keys)
    assert answer.state is ClaimState.COMPLETED
    assert answer.result == result


def test_another_payload_under_the_same_key_is_a_conflict(
    keys: IdempotencyKeys,
) -> None:
    token = claimed(keys, job_id="job-1")
    assert claim(keys, payload_hash=OTHER_HASH).state is ClaimState.CONFLICT
    keys.complete("charge-1", token, result=None, ttl_seconds=3600)
    answer = claim(keys, payload_hash=OTHER_HASH, job_id="job-2")
    assert answer.state is ClaimState.CONFLICT
    assert answer.holder_job_id == "job-1"


def test_a_key_whose_lease_ended_is_claimed_again(keys: IdempotencyKeys) -> None:
    stale = claimed(keys, job_id="job-1", lease_seconds=SHORT)
    answer = claim_within(keys, job_id="job-2", payload_hash=OTHER_HASH)
    assert answer.state is ClaimState.CLAIMED
    assert answer.token != stale
    assert keys.renew("charge-1", stale, LONG_LEASE) is False
    assert claim(keys).state is ClaimState.CONFLICT


def test_a_completed_key_is_forgotten_after_its_ttl(keys: IdempotencyKeys) -> None:
    token = claimed(keys)
    keys.complete("charge-1", token, result="first", ttl_seconds=SHORT)
    answer = claim_within(keys, payload_hash=OTHER_HASH)
    assert answer.state is ClaimState.CLAIMED


def test_renew_extends_the_lease(keys: IdempotencyKeys) -> None:
    token = claimed(keys, lease_seconds=60)
    assert keys.renew("charge-1", token, 3600) is True
    answer = claim(keys)
    assert answer.state is ClaimState.IN_PROGRESS
    assert answer.retry_after_seconds is not None
    assert answer.retry_after_seconds > 60


def test_a_wrong_token_can_neither_renew_complete_nor_relinquish(
    keys: IdempotencyKeys,
) -> None:
    token = claimed(keys, lease_seconds=60)
    assert keys.renew("charge-1", "not-the-token", 3600) is False
    with pytest.raises(RuntimeError, match="no longer held"):
        keys.complete("charge-1", "not-the-token", result="x", ttl_seconds=3600)
    keys.relinquish("charge-1", "not-the-token")
    answer = claim(keys)
    assert answer.state is ClaimState.IN_PROGRESS
    assert answer.retry_after_seconds is not None
    assert answer.retry_after_seconds <= 60
    keys.complete("charge-1", token, result="mine", ttl_seconds=3600)
    assert claim(keys).result == "mine"


def test_a_token_means_nothing_on_another_key(keys: IdempotencyKeys) -> None:
    token = claimed(keys, key="charge-1")
    claimed(keys, key="charge-2")
    assert keys.renew("charge-2", token, 3600) is False
    keys.relinquish("charge-2", token)
    assert claim(keys, key="charge-2").state is ClaimState.IN_PROGRESS


def test_a_relinquished_key_is_free_again(keys: IdempotencyKeys) -> None:
    token = claimed(keys, job_id="job-1")
    keys.relinquish("charge-1", token)
    assert claim(keys, job_id="job-2").state is ClaimState.CLAIMED


def test_a_completed_key_cannot_be_relinquished(keys: IdempotencyKeys) -> None:
    token = claimed(keys)
    keys.complete("charge-1", token, result=1, ttl_seconds=3600)
    keys.relinquish("charge-1", token)
    assert claim(keys).state is ClaimState.COMPLETED


def test_of_concurrent_claims_exactly_one_wins(keys: IdempotencyKeys) -> None:
    contenders = 8
    start = threading.Barrier(contenders)
    answers: list[Claim] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def contend(index: int) -> None:
        try:
            start.wait(timeout=30)
            answer = claim(keys, key="race", job_id=f"job-{index}")
        except BaseException as exc:  # reported below, in the test's thread
            with lock:
                errors.append(exc)
            return
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    states = sorted(answer.state.value for answer in answers)
    assert states == ["claimed"] + ["in_progress"] * (contenders - 1)
    [winner] = [a for a in answers if a.state is ClaimState.CLAIMED]
    holders = {a.holder_job_id for a in answers if a.state is ClaimState.IN_PROGRESS}
    assert len(holders) == 1
    assert holders != {None}
    assert winner.token
