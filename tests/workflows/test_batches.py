"""Batches on the SQL store: children and callbacks through a real worker."""

from __future__ import annotations

import json
import time

import pytest
import sqlalchemy as sa
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store.outbox import flush_all
from flask_sqs_jobs.store.sql import batches_table

from tests.workflows.conftest import Flow


def test_callbacks_run_once_after_every_child_succeeded(flow: Flow) -> None:
    child, on_done = flow.child, flow.on_done
    flow.failing["b"] = 1  # fails once, then succeeds
    batch = flow.jobs.batch(
        [child.s(key=k) for k in "abc"],
        on_success=on_done.s(label="success"),
        on_complete=on_done.s(label="complete"),
        on_failure=on_done.s(label="failure"),
        description="three letters",
    ).enqueue()
    flow.run_until(lambda: len(flow.called("on_done")) >= 2)
    record = flow.jobs.get_batch(batch.batch_id)
    assert record is not None
    assert (record.status, record.total, record.pending) == ("succeeded", 3, 0)
    assert (record.succeeded, record.failed, record.failures) == (3, 0, [])
    assert record.description == "three letters"
    assert record.callbacks_sent == ["on_complete", "on_success"]
    assert record.finished_at is not None
    labels = sorted(c["label"] for c in flow.called("on_done"))
    assert labels == ["complete", "success"]
    assert {c["batch_id"] for c in flow.called("on_done")} == {batch.batch_id}


def test_a_child_failing_for_good_runs_failure_and_complete_never_success(
    flow: Flow,
) -> None:
    child, on_done = flow.child, flow.on_done
    flow.failing["x"] = -1
    batch = flow.jobs.batch(
        [child.s(key="x"), child.s(key="y")],
        on_success=on_done.s(label="success"),
        on_complete=on_done.s(label="complete"),
        on_failure=on_done.s(label="failure"),
    ).enqueue()
    flow.run_until(lambda: len(flow.called("on_done")) >= 2)
    record = flow.jobs.get_batch(batch.batch_id)
    assert record is not None
    assert (record.status, record.succeeded, record.failed) == ("completed", 1, 1)
    assert [f["job_type"] for f in record.failures] == ["child"]
    assert "child x fails for good" in record.failures[0]["error"]
    assert sorted(c["label"] for c in flow.called("on_done")) == ["complete", "failure"]


def test_a_dead_lettered_child_counts_as_failed(flow: Flow) -> None:
    child, on_done = flow.child, flow.on_done
    flow.failing["z"] = 10  # fails on every one of its 3 receives
    batch = flow.jobs.batch(
        [child.s(key="z")], on_complete=on_done.s(label="complete")
    ).enqueue()
    flow.run_until(lambda: bool(flow.called("on_done")))
    record = flow.jobs.get_batch(batch.batch_id)
    assert record is not None
    assert (record.status, record.failed) == ("completed", 1)
    assert len(flow.called("child")) == 3
    dead = flow.sqs.receive_message(QueueUrl=flow.urls["dlq"]).get("Messages", [])
    assert len(dead) == 1


def test_a_batch_in_a_rolled_back_session_sends_nothing_and_leaves_no_row(
    flow: Flow,
) -> None:
    child = flow.child
    store = flow.jobs.store()
    with sa.orm.Session(store.engine) as session:  # type: ignore[attr-defined]
        batch = flow.jobs.batch([child.s(key="a")]).enqueue(session=session)
        session.rollback()
    assert flow.jobs.get_batch(batch.batch_id) is None
    sent = flow.sqs.receive_message(QueueUrl=flow.urls["default"])
    assert sent.get("Messages") is None
    with store.engine.connect() as connection:  # type: ignore[attr-defined]
        assert connection.execute(sa.select(batches_table)).all() == []


def test_a_batch_is_checked_when_declared(flow: Flow) -> None:
    child, on_done = flow.child, flow.on_done
    with pytest.raises(TypeError, match="missing argument"):
        flow.jobs.batch([child.s()])
    with pytest.raises(TypeError, match="Signature"):
        flow.jobs.batch([{"key": "a"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="unexpected keyword"):
        child.s(colour="red")
    with pytest.raises(ValueError, match="at least one child"):
        flow.jobs.batch([], on_complete=on_done.s())
    assert flow.jobs.get_batch("no-such-batch") is None


def test_a_batch_without_a_sql_store_fails_when_declared(make_app: object) -> None:
    jobs = SQSJobs()

    @jobs.task
    def child(key: str) -> None: ...

    app = make_app(extension=jobs)  # type: ignore[operator]
    with app.app_context(), pytest.raises(RuntimeError, match="needs a SQL job store"):
        jobs.batch([child.s(key="a")])


def test_the_batch_command_shows_counts_and_escaped_failures(flow: Flow) -> None:
    flow.failing["\x1b[31mred"] = -1
    batch = flow.jobs.batch(
        [flow.child.s(key="\x1b[31mred"), flow.child.s(key="fine")],
        on_complete=flow.on_done.s(),
        description="nightly \x1b[2J",
    ).enqueue()
    flow.run_until(lambda: bool(flow.called("on_done")))
    runner = flow.app.test_cli_runner()
    shown = runner.invoke(args=["sqs-jobs", "batch", batch.batch_id])
    assert shown.exit_code == 0, shown.output
    assert "status: completed" in shown.output
    assert "pending: 0" in shown.output
    assert "succeeded: 1" in shown.output
    assert "callbacks_sent: on_complete" in shown.output
    assert "description: nightly \\x1b[2J" in shown.output
    assert "\x1b" not in shown.output
    assert "child \\x1b[31mred fails for good" in shown.output
    as_json = runner.invoke(args=["sqs-jobs", "batch", batch.batch_id, "--json"])
    fields = json.loads(as_json.output)
    assert (fields["total"], fields["failed"]) == (2, 1)
    assert fields["failures"][0]["error"].endswith("fails for good")
    missing = runner.invoke(args=["sqs-jobs", "batch", "no-such-batch"])
    assert missing.exit_code == 1
    assert "no batch no-such-batch" in missing.output


@pytest.mark.with_records
def test_a_child_cancelled_before_it_ran_counts_as_failed(flow: Flow) -> None:
    batch = flow.jobs.batch(
        [flow.child.s(key="kept"), flow.child.s(key="dropped")],
        on_complete=flow.on_done.s(label="complete"),
        on_success=flow.on_done.s(label="success"),
    ).enqueue()
    dropped = batch.job_ids[1]
    # Its record is written once the send after commit has sent it.
    deadline = time.monotonic() + 30
    while flow.jobs.get_job(dropped) is None and time.monotonic() < deadline:
        flush_all()
    assert flow.jobs.cancel(dropped)
    flow.run_until(lambda: bool(flow.called("on_done")))
    record = flow.jobs.get_batch(batch.batch_id)
    assert record is not None
    assert (record.status, record.succeeded, record.failed) == ("completed", 1, 1)
    assert record.failures[0]["error"] == "cancelled: deleted unrun"
    assert [c["key"] for c in flow.called("child")] == ["kept"]
    assert [c["label"] for c in flow.called("on_done")] == ["complete"]


def test_a_child_adds_a_child_and_the_batch_completes_after_both(flow: Flow) -> None:
    batch = flow.jobs.batch(
        [flow.parent.s(key="p")] + [flow.child.s(key=k) for k in "abcdefghij"],
        on_complete=flow.on_done.s(label="complete"),
        on_success=flow.on_done.s(label="success"),
    ).enqueue()
    flow.run_until(lambda: len(flow.called("on_done")) >= 2)
    assert flow.called("parent") == [{"key": "p", "batch_id": batch.batch_id}]
    assert "p-more" in [c["key"] for c in flow.called("child")]
    record = flow.jobs.get_batch(batch.batch_id)
    assert record is not None
    assert (record.total, record.succeeded, record.pending) == (12, 12, 0)
    assert sorted(c["label"] for c in flow.called("on_done")) == ["complete", "success"]


def test_a_job_outside_a_batch_has_no_batch(flow: Flow) -> None:
    from flask_sqs_jobs import Job

    assert (Job("t", {}, "default").batch, Job("t", {}, "default").batch_id) == (
        None,
        None,
    )
