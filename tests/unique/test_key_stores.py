"""Each store's unique keys: take, duplicate, release by the holder only, expiry."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.dynamodb._unique_keys import DynamoDBUniqueKeys


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sql", "dynamodb"])
def keys(
    request: pytest.FixtureRequest, tmp_path: t.Any
) -> cabc.Iterator[tuple[t.Any, cabc.Callable[[], None]]]:
    """A store's unique keys, and a way to let every key's time run out."""
    if request.param == "sql":
        store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
        store.create_tables()

        def expire() -> None:
            with store.engine.begin() as connection:
                connection.execute(
                    sa.text("UPDATE sqs_jobs_unique_keys SET expires_at = created_at")
                )

        yield store.unique_keys(), expire
        store.close()
        return
    client = request.getfixturevalue("dynamodb_client")
    table = request.getfixturevalue("table_name")
    DynamoDBStore(table, boto_client=client).create_tables()
    clock = Clock()

    def later() -> None:
        clock.now += 61

    yield DynamoDBUniqueKeys(client, table, clock=clock), later


def test_a_key_is_held_by_one_job_until_its_holder_releases_it(
    keys: tuple[t.Any, cabc.Callable[[], None]],
) -> None:
    store_keys, _ = keys
    assert store_keys.take("report:k", "j-1", hold_seconds=60) is None
    assert store_keys.take("report:k", "j-2", hold_seconds=60) == "j-1"
    store_keys.release("report:k", "j-2")  # not the holder: nothing changes
    assert store_keys.take("report:k", "j-3", hold_seconds=60) == "j-1"
    store_keys.release("report:k", "j-1")
    assert store_keys.take("report:k", "j-4", hold_seconds=60) is None
    assert store_keys.take("report:other", "j-5", hold_seconds=60) is None


def test_a_key_whose_time_ran_out_is_taken_over(
    keys: tuple[t.Any, cabc.Callable[[], None]],
) -> None:
    store_keys, expire = keys
    assert store_keys.take("report:k", "j-1", hold_seconds=60) is None
    expire()
    assert store_keys.take("report:k", "j-2", hold_seconds=60) is None
    store_keys.release("report:k", "j-1")  # the old holder frees nothing now
    assert store_keys.take("report:k", "j-3", hold_seconds=60) == "j-2"


def test_workers_delete_expired_sql_keys_with_the_idempotency_keys(
    tmp_path: t.Any,
) -> None:
    from flask_sqs_jobs.store.records._presence import _key_forgetting

    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    keys = store.unique_keys()
    keys.take("report:old", "j-1", hold_seconds=60)
    keys.take("report:live", "j-2", hold_seconds=60)
    with store.engine.begin() as connection:
        connection.execute(
            sa.text(
                "UPDATE sqs_jobs_unique_keys SET expires_at = created_at"
                " WHERE key = 'report:old'"
            )
        )
    forget = _key_forgetting(store)
    assert forget is not None
    assert forget() == 1
    assert keys.take("report:live", "j-3", hold_seconds=60) == "j-2"
    store.close()
