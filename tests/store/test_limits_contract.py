"""The limits protocol (token buckets, concurrency permits), the same on every store.

Each test runs once per backend: a SQLite file, PostgreSQL, and DynamoDB on
moto's server.
"""

from __future__ import annotations

import collections.abc as cabc
import concurrent.futures
import time
import typing as t

import pytest
from flask_sqs_jobs.engine.flow import LimitStore

from tests.store.test_idempotency_keys_contract import BACKENDS
from tests.store.test_idempotency_keys_contract import make_store

#: Long enough never to end during a test.
LONG = 600.0
#: How long a test polls for something that must happen soon.
DEADLINE = 10.0


@pytest.fixture(params=BACKENDS)
def limits(request: pytest.FixtureRequest) -> cabc.Iterator[LimitStore]:
    store = make_store(request.param, request)
    store.create_tables()
    yield store.limits()
    store.close()


def eventually(check: cabc.Callable[[], bool]) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_a_new_bucket_starts_full_and_then_refuses_saying_how_long(
    limits: LimitStore,
) -> None:
    takes = [limits.take_token("api", "", 3, 60) for _ in range(4)]
    assert takes[:3] == [0.0, 0.0, 0.0]
    # One token comes back every 20 s.
    assert 0 < takes[3] <= 20


def test_a_bucket_refills_over_time(limits: LimitStore) -> None:
    assert limits.take_token("fast", "", 1, 0.2) == 0.0
    assert eventually(lambda: limits.take_token("fast", "", 1, 0.2) == 0.0)


def test_each_key_and_each_name_has_a_bucket_of_its_own(limits: LimitStore) -> None:
    assert limits.take_token("api", "tenant-a", 1, 3600) == 0.0
    assert limits.take_token("api", "tenant-a", 1, 3600) > 0
    assert limits.take_token("api", "tenant-b", 1, 3600) == 0.0
    assert limits.take_token("other", "tenant-a", 1, 3600) == 0.0


def test_racing_takes_never_hand_out_more_tokens_than_the_bucket_holds(
    limits: LimitStore,
) -> None:
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        waits = list(
            pool.map(lambda _: limits.take_token("race", "", 10, 3600), range(30))
        )
    assert waits.count(0.0) == 10


def test_permits_are_limited_and_come_back_when_released(limits: LimitStore) -> None:
    first = limits.acquire_permit("db", "t1", 2, "job-1", LONG)
    second = limits.acquire_permit("db", "t1", 2, "job-2", LONG)
    assert first is not None
    assert second is not None
    assert first != second
    assert limits.acquire_permit("db", "t1", 2, "job-3", LONG) is None
    # Another key has permits of its own.
    assert limits.acquire_permit("db", "t2", 2, "job-4", LONG) is not None

    limits.release_permit("db", "t1", first, "job-1")
    assert limits.acquire_permit("db", "t1", 2, "job-3", LONG) == first


def test_only_the_holder_releases_or_renews_its_permit(limits: LimitStore) -> None:
    slot = limits.acquire_permit("db", "", 1, "job-1", LONG)
    assert slot is not None
    limits.release_permit("db", "", slot, "someone-else")
    assert limits.renew_permit("db", "", slot, "someone-else", LONG) is False
    assert limits.acquire_permit("db", "", 1, "job-2", LONG) is None
    assert limits.renew_permit("db", "", slot, "job-1", LONG) is True


def test_a_permit_whose_lease_ended_is_taken_over(limits: LimitStore) -> None:
    slot = limits.acquire_permit("db", "", 1, "dead-worker", 0.2)
    assert slot is not None
    assert eventually(
        lambda: limits.acquire_permit("db", "", 1, "job-2", LONG) is not None
    )
    # The dead holder can no longer renew it.
    assert limits.renew_permit("db", "", slot, "dead-worker", LONG) is False


def test_a_renewed_permit_outlives_its_first_lease(limits: LimitStore) -> None:
    slot = limits.acquire_permit("db", "", 1, "job-1", 1.0)
    assert slot is not None
    assert limits.renew_permit("db", "", slot, "job-1", LONG) is True
    started = time.monotonic()
    assert eventually(lambda: time.monotonic() - started > 1.5)
    assert limits.acquire_permit("db", "", 1, "job-2", LONG) is None


def test_racing_acquires_never_hold_more_permits_than_the_limit(
    limits: LimitStore,
) -> None:
    def acquire(n: int) -> t.Any:
        return limits.acquire_permit("race", "", 3, f"job-{n}", LONG)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        slots = list(pool.map(acquire, range(16)))
    granted = [slot for slot in slots if slot is not None]
    assert sorted(granted) == [0, 1, 2]


def test_racing_takers_and_returners_all_get_answers(limits: LimitStore) -> None:
    def take_and_return(n: int) -> int:
        taken = 0
        for round_ in range(10):
            holder = f"job-{n}-{round_}"
            slot = limits.acquire_permit("busy", "", 16, holder, LONG)
            if slot is not None:
                taken += 1
                limits.release_permit("busy", "", slot, holder)
        return taken

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(take_and_return, range(8)))
    # Never more holders than slots, so every take found a free one.
    assert taken == [10] * 8
