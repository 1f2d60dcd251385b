"""Rows that cannot be sent: blocked FIFO groups, attempt limits, parked rows."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from botocore.exceptions import ClientError
from botocore.exceptions import ParamValidationError
from flask_sqs_jobs.store.outbox import _claim
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows

from tests.store.outbox_apps import App
from tests.store.outbox_apps import due_now
from tests.store.outbox_apps import outbox
from tests.store.outbox_apps import refuse
from tests.store.outbox_apps import World
from tests.store.test_outbox import pending_rows
from tests.store.test_outbox import received


@pytest.mark.parametrize("held_back_by", ["a back-off", "a parked row"])
def test_a_blocked_fifo_group_never_starves_the_other_queues(
    world: World,
    make_app: t.Callable[..., App],
    monkeypatch: pytest.MonkeyPatch,
    held_back_by: str,
) -> None:
    first = make_app(
        SQS_JOBS_OUTBOX_MAX_ATTEMPTS=1 if held_back_by == "a parked row" else 20
    )
    first.write("orders", 151, message_group_id="g")
    monkeypatch.setattr(_outbox_rows, "backoff_seconds", lambda attempts: 3600.0)
    # A pass moves at most 50 held-back rows out of the way: the query itself
    # skips the others.
    monkeypatch.setattr(_claim, "PUSH_LIMIT", 50)
    with monkeypatch.context() as patch:
        refuse(first, "orders", patch)
        assert first.relay().run_pass() == 10  # the group's first request failed
    blocked = pending_rows(first.store)
    assert len(blocked) == 151
    if held_back_by == "a parked row":
        assert [r.parked_at is not None for r in blocked[:11]] == [True] * 10 + [False]

    ids = first.write("default", 5)
    relay = first.relay()
    assert relay.run_pass() == 5  # the first pass, behind 141 blocked rows
    assert sorted(
        b["job_id"] for b in received(world.sqs, world.default_url)
    ) == sorted(ids)

    # After a restart: a new process, a new relay, the same rows.
    later = make_app()
    ids = later.write("default", 5)
    assert later.relay().run_pass() == 5
    assert sorted(
        b["job_id"] for b in received(world.sqs, world.default_url)
    ) == sorted(ids)
    assert received(world.sqs, world.orders_url) == []
    assert len(pending_rows(later.store)) == 151

    # The held-back rows wait out of the claim's way (50 more a pass), and come
    # back with the rows that held them: the whole group goes, in order.
    assert later.relay().run_pass() == 0
    states = later.app.test_cli_runner().invoke(
        args=["sqs-jobs", "outbox", "list", "--json", "--limit", "200"]
    )
    held = {r["state"] for r in json.loads(states.output)["rows"][10:]}
    if held_back_by == "a parked row":
        assert held == {"blocked"}
        retried = later.app.test_cli_runner().invoke(
            args=["sqs-jobs", "outbox", "retry", "--all-parked"]
        )
        assert "retrying 10 row(s)" in retried.output
    else:
        assert held == {"waiting"}
        due_now(later.store)
    assert later.relay().drain() == 151
    sent = [b["job_id"] for b in received(world.sqs, world.orders_url)]
    assert sent == [r.job_id for r in blocked]


def test_a_row_is_parked_after_max_attempts_with_its_last_error(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=3)
    made.write("default", 1)
    relay = made.relay()
    with monkeypatch.context() as patch:
        refuse(made, "default", patch)
        assert relay.run_pass() == 1
        assert relay.run_pass() == 0  # backing off: not tried again yet
        (row,) = pending_rows(made.store)
        assert (row.attempts, row.parked_at) == (1, None)
        assert row.available_at > dt.datetime.now(dt.UTC)
        for attempts in (2, 3):
            due_now(made.store)
            assert relay.run_pass() == 1
            (row,) = pending_rows(made.store)
            assert row.attempts == attempts
        assert row.parked_at is not None
        assert row.last_error == "Throttled: slow"
        due_now(made.store)
        assert relay.drain() == 0  # parked: never tried again
    assert relay.drain() == 0  # not even once SQS would take it
    assert received(world.sqs, world.default_url) == []
    assert len(pending_rows(made.store)) == 1


@pytest.mark.parametrize(
    ("attributes", "error"),
    [
        ("{not json", "message_attributes is not JSON"),
        ("[1, 2]", "message_attributes must be a dict"),
        ('{"tenant": "acme"}', "tenant"),  # not SendMessage's shape
    ],
)
def test_an_unreadable_row_is_parked_and_the_others_are_sent(
    world: World,
    make_app: t.Callable[..., App],
    log_events: list[t.Any],
    attributes: str,
    error: str,
) -> None:
    made = make_app()
    ids = made.write("default", 3)
    poisoned = pending_rows(made.store)[1]
    with made.store.engine.begin() as connection:
        connection.execute(
            sa.update(outbox)
            .where(outbox.c.id == poisoned.id)
            .values(message_attributes=attributes)
        )
    assert made.relay().drain() == 3
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted([ids[0], ids[2]])
    (row,) = pending_rows(made.store)
    assert row.id == poisoned.id
    assert row.parked_at is not None
    assert row.last_error.startswith("UnreadableRowError: ")
    assert error in row.last_error
    parked = [e for e in log_events if e["event"] == "outbox_row_parked"]
    assert parked[0]["row_ids"] == [poisoned.id]


def test_rows_of_a_deleted_queue_are_parked_not_retried_for_ever(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=2)
    assert made.jobs.queue_group(made.app).queue("default").url  # before the delete
    made.write("default", 2)
    world.sqs.delete_queue(QueueUrl=world.default_url)
    relay = made.relay()
    assert relay.run_pass() == 2
    due_now(made.store)
    assert relay.run_pass() == 2
    rows = pending_rows(made.store)
    assert [r.attempts for r in rows] == [2, 2]
    assert all(r.parked_at is not None for r in rows)
    assert all(
        "NonExistentQueue" in r.last_error or "QueueDoesNotExist" in r.last_error
        for r in rows
    )
    due_now(made.store)
    assert relay.drain() == 0


def test_an_oversized_row_fails_alone_not_its_whole_batch(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app()
    queue = made.jobs.queue_group(made.app).queue("default")
    assert queue.max_message_size > 4096  # read before the queue's limit is lowered
    small = made.write("default", 4)
    with made.app.app_context(), sa.orm.Session(made.store.engine) as session:
        big = made.jobs.enqueue("default", "big", {"blob": "x" * 4000}, session=session)
        session.commit()
    world.sqs.set_queue_attributes(
        QueueUrl=world.default_url, Attributes={"MaximumMessageSize": "1024"}
    )
    assert made.relay().run_pass() == 5
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted(small)
    (row,) = pending_rows(made.store)
    assert (row.job_id, row.attempts) == (big, 1)
    assert "shorter than 1024" in row.last_error


def test_a_request_refused_as_too_long_is_sent_one_message_at_a_time(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app()
    ids = made.write("orders", 4, message_group_id="g")
    queue = made.jobs.queue_group(made.app).queue("orders")
    real_send_batch = queue.send_batch
    requests: list[int] = []

    def too_long_together(entries: list[dict[str, t.Any]]) -> t.Any:
        requests.append(len(entries))
        if len(entries) > 1:
            code = "AWS.SimpleQueueService.BatchRequestTooLong"
            raise ClientError({"Error": {"Code": code}}, "SendMessageBatch")
        return real_send_batch(entries)

    monkeypatch.setattr(queue, "send_batch", too_long_together)
    assert made.relay().run_pass() == 4
    assert requests == [4, 1, 1, 1, 1]
    assert [b["job_id"] for b in received(world.sqs, world.orders_url)] == ids
    assert pending_rows(made.store) == []


def test_a_row_botocore_refuses_is_parked_at_once_and_its_batch_sent(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app()
    ids = made.write("default", 3)
    queue = made.jobs.queue_group(made.app).queue("default")
    real_send_batch = queue.send_batch

    def refuse_the_second(entries: list[dict[str, t.Any]]) -> t.Any:
        if any(ids[1] in entry["MessageBody"] for entry in entries):
            raise ParamValidationError(report="Invalid type for parameter")
        return real_send_batch(entries)

    monkeypatch.setattr(queue, "send_batch", refuse_the_second)
    assert made.relay().run_pass() == 3
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted([ids[0], ids[2]])
    (row,) = pending_rows(made.store)
    assert (row.job_id, row.attempts) == (ids[1], 1)
    assert row.parked_at is not None
    assert row.last_error.startswith("ParamValidationError")
