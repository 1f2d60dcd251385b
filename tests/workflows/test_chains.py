"""Chains on the SQL store: steps one after another through a real worker."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask_sqs_jobs import SQSJobs

from tests.workflows.conftest import Flow


def _status(flow: Flow, chain_id: str) -> str | None:
    record = flow.jobs.get_chain(chain_id)
    return None if record is None else record.status


def _run_until_stopped(flow: Flow) -> tuple[str, t.Any]:
    """Run the chain a, b, c until it stops; its id and record."""
    chain = flow.jobs.chain(
        flow.step.s(name="a"), flow.step.s(name="b"), flow.step.s(name="c")
    ).enqueue()
    flow.run_until(lambda: _status(flow, chain.chain_id) == "failed")
    record = flow.jobs.get_chain(chain.chain_id)
    assert record is not None
    return chain.chain_id, record


def _steps(flow: Flow) -> list[tuple[str, t.Any]]:
    return [(c["name"], c["previous_result"]) for c in flow.called("step")]


def test_a_step_that_fails_twice_then_succeeds_passes_its_result_on(
    flow: Flow,
) -> None:
    flow.failing["b"] = 2
    chain = flow.jobs.chain(
        flow.step.s(name="a"),
        flow.step.s(name="b"),
        flow.step.s(name="c"),
        pass_result=True,
    ).enqueue()
    flow.run_until(lambda: _status(flow, chain.chain_id) == "succeeded")
    assert _steps(flow) == [
        ("a", None),
        ("b", ["a"]),
        ("b", ["a"]),
        ("b", ["a"]),
        ("c", ["a", "b"]),
    ]
    done = flow.jobs.get_chain(chain.chain_id)
    assert done is not None
    assert (done.steps, done.current_step, done.failed_step) == (
        ["step", "step", "step"],
        2,
        None,
    )
    assert len(done.job_ids) == 3
    assert done.job_ids[0] == chain.job_id
    assert done.finished_at is not None


def test_an_immutable_step_never_gets_the_previous_result(flow: Flow) -> None:
    chain = flow.jobs.chain(
        flow.step.s(name="a"), flow.step.si(name="b"), pass_result=True
    ).enqueue()
    flow.run_until(lambda: _status(flow, chain.chain_id) == "succeeded")
    assert _steps(flow) == [("a", None), ("b", None)]


def test_a_step_failing_for_good_stops_the_chain_naming_the_step(flow: Flow) -> None:
    flow.failing["b"] = -1
    _, record = _run_until_stopped(flow)
    assert (record.failed_step, record.current_step) == (1, 1)
    assert record.error == "NonRetryableError: step b fails for good"
    assert [name for name, _ in _steps(flow)] == ["a", "b"]


def test_a_dead_lettered_step_stops_the_chain_and_its_redrive_resumes_it(
    flow: Flow,
) -> None:
    flow.failing["b"] = 3  # fails on each of its 3 receives: dead-lettered
    chain_id, record = _run_until_stopped(flow)
    assert record.failed_step == 1
    assert "step b fails this time" in (record.error or "")
    dead = flow.sqs.receive_message(
        QueueUrl=flow.urls["dlq"], MessageAttributeNames=["All"]
    )["Messages"]
    assert len(dead) == 1
    flow.sqs.send_message(
        QueueUrl=flow.urls["default"],
        MessageBody=dead[0]["Body"],
        MessageAttributes={
            name: value
            for name, value in dead[0].get("MessageAttributes", {}).items()
            if name != "dead_letter"
        },
    )
    flow.run_until(lambda: _status(flow, chain_id) == "succeeded")
    assert [name for name, _ in _steps(flow)] == ["a", "b", "b", "b", "b", "c"]


def test_a_chain_is_checked_when_declared(flow: Flow) -> None:
    with pytest.raises(TypeError, match="must take previous_result"):
        flow.jobs.chain(flow.step.s(name="a"), flow.child.s(key="k"), pass_result=True)
    with pytest.raises(TypeError, match="missing argument"):
        flow.jobs.chain(flow.step.s())
    with pytest.raises(ValueError, match="at least one step"):
        flow.jobs.chain()
    assert flow.jobs.get_chain("no-such-chain") is None


def test_a_chain_in_a_rolled_back_session_leaves_nothing(flow: Flow) -> None:
    store = flow.jobs.store()
    with sa.orm.Session(store.engine) as session:  # type: ignore[attr-defined]
        chain = flow.jobs.chain(flow.step.s(name="a")).enqueue(session=session)
        session.rollback()
    assert flow.jobs.get_chain(chain.chain_id) is None
    sent = flow.sqs.receive_message(QueueUrl=flow.urls["default"])
    assert sent.get("Messages") is None


def test_a_chain_without_a_sql_store_fails_when_declared(make_app: t.Any) -> None:
    jobs = SQSJobs()

    @jobs.task
    def step(name: str) -> None: ...

    app = make_app(extension=jobs)
    with app.app_context(), pytest.raises(RuntimeError, match="needs a SQL job store"):
        jobs.chain(step.s(name="a"))
