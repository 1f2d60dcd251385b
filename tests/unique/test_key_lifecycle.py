"""A unique key's life, as random sequences of takes, releases, expiries and rollbacks.

A model (key -> holder) says what each take must answer; every store must
answer the same, whatever the order: a free key is taken, a held one names
its holder, only the holder frees it, an expired one is taken over, and a
take in a rolled-back session leaves nothing behind.
"""

from __future__ import annotations

import collections.abc as cabc
import itertools
import typing as t

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.dynamodb._unique_keys import DynamoDBUniqueKeys
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import run_state_machine_as_test

SETTINGS = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
KEYS = st.sampled_from(["report:a", "report:b", "other:a"])
HOLD = 60.0


class Backend(t.Protocol):
    keys: t.Any
    #: Opens a session on the store's database (None: the store has none).
    session: cabc.Callable[[], t.Any] | None

    def expire_all(self) -> None: ...


class SQLBackend:
    def __init__(self, store: SQLAlchemyStore) -> None:
        self.keys = store.unique_keys()
        self.session: cabc.Callable[[], t.Any] | None = store.session
        self._engine = store.engine

    def expire_all(self) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE sqs_jobs_unique_keys SET expires_at = created_at")
            )


class DynamoDBBackend:
    def __init__(self, client: t.Any, table: str) -> None:
        self.now = 1_000_000.0
        self.keys = DynamoDBUniqueKeys(client, table, clock=lambda: self.now)
        self.session: cabc.Callable[[], t.Any] | None = None

    def expire_all(self) -> None:
        self.now += HOLD + 1


def lifecycle(backend: Backend) -> type[RuleBasedStateMachine]:
    class KeyLifecycle(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            backend.expire_all()  # each sequence starts with every key free
            self.holders: dict[str, str] = {}
            self.known: list[str] = ["nobody"]
            # Per sequence, so a replayed sequence takes with the same ids.
            self.job_ids = (f"j-{n}" for n in itertools.count())

        @rule(key=KEYS)
        def take(self, key: str) -> None:
            job_id = next(self.job_ids)
            self.known.append(job_id)
            answer = backend.keys.take(key, job_id, hold_seconds=HOLD)
            assert answer == self.holders.get(key)
            self.holders.setdefault(key, job_id)

        @rule(key=KEYS, data=st.data())
        def release(self, key: str, data: st.DataObject) -> None:
            job_id = data.draw(st.sampled_from(self.known))
            backend.keys.release(key, job_id)
            if self.holders.get(key) == job_id:
                del self.holders[key]

        @rule()
        def expire(self) -> None:
            backend.expire_all()
            self.holders.clear()

        @rule(key=KEYS, commit=st.booleans())
        def take_in_a_session(self, key: str, commit: bool) -> None:
            if backend.session is None:
                return
            job_id = next(self.job_ids)
            self.known.append(job_id)
            with backend.session() as session:
                answer = backend.keys.take(
                    key, job_id, hold_seconds=HOLD, session=session
                )
                assert answer == self.holders.get(key)
                if commit:
                    session.commit()
                    self.holders.setdefault(key, job_id)
                else:
                    session.rollback()

    return KeyLifecycle


@pytest.mark.parametrize("kind", ["sqlite", "dynamodb"])
def test_every_sequence_answers_as_the_model(
    kind: str, request: pytest.FixtureRequest, tmp_path: t.Any
) -> None:
    backend: Backend
    if kind == "sqlite":
        store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
        store.create_tables()
        backend = SQLBackend(store)
    else:
        client = request.getfixturevalue("dynamodb_client")
        table = request.getfixturevalue("table_name")
        DynamoDBStore(table, boto_client=client).create_tables()
        backend = DynamoDBBackend(client, table)
    run_state_machine_as_test(lifecycle(backend), settings=SETTINGS)
