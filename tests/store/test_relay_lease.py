"""``SQS_JOBS_OUTBOX_RELAYS``: at most N relays of a fleet active, the rest stand by."""

from __future__ import annotations

import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _relay_lease
from flask_sqs_jobs.store.outbox import RelayLease

from tests.log_capture import capture_logs


class Clock:
    """A monotonic clock the test moves: a lease's next store call comes when due."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(sql_store: SQLAlchemyStore) -> SQLAlchemyStore:
    return sql_store


def test_two_of_three_relays_are_active_and_a_freed_slot_is_taken(
    store: SQLAlchemyStore,
) -> None:
    clock = Clock()
    leases = [RelayLease(store.limits(), 2, clock=clock) for _ in range(3)]

    assert [lease.active() for lease in leases] == [True, True, False]
    assert sorted(t.cast(int, lease.slot) for lease in leases[:2]) == [0, 1]
    # Between calls nothing is asked of the store: the answers hold.
    assert [lease.active() for lease in leases] == [True, True, False]

    leases[0].release()
    clock.now += _relay_lease.STANDBY_SECONDS
    assert leases[2].active()
    assert leases[0].active() is False  # the slot it gave back is taken


def test_a_relay_that_stops_renewing_loses_its_slot_to_one_standing_by(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_relay_lease, "LEASE_SECONDS", 0.5)
    clock = Clock()
    dead = RelayLease(store.limits(), 1, clock=clock)
    waiting = RelayLease(store.limits(), 1, clock=clock)
    assert dead.active()
    assert not waiting.active()

    # ``dead`` never calls again (a SIGKILL): its lease ends on its own.
    deadline = time.monotonic() + 10
    while True:
        clock.now += _relay_lease.STANDBY_SECONDS
        if waiting.active():
            break
        assert time.monotonic() < deadline, "the dead relay's slot never came back"
        time.sleep(0.05)
    # The old holder finds out at its next renewal, and stands by.
    clock.now += _relay_lease.RENEW_SECONDS
    assert not dead.active()


def test_slots_that_cannot_be_read_let_the_relay_run_and_say_why(
    tmp_path: t.Any,
) -> None:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'no-tables.db'}")  # no tables
    lease = RelayLease(store.limits(), 2, clock=Clock())
    with capture_logs() as logs:
        assert lease.active()
    store.close()
    [failed] = [line for line in logs if line["event"] == "outbox_relay_lease_failed"]
    assert "store init" in failed["hint"]


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, True])
def test_the_setting_must_be_a_positive_number_of_relays(value: object) -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": "https://sqs.example/1/default"}},
        SQS_JOBS_OUTBOX_RELAYS=value,
    )
    with pytest.raises(ValueError, match="SQS_JOBS_OUTBOX_RELAYS must be a positive"):
        SQSJobs(app)


def test_the_setting_defaults_to_two() -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": "https://sqs.example/1/default"}}
    )
    jobs = SQSJobs(app)
    with app.app_context():
        assert jobs.parts().config.outbox_relays == 2
