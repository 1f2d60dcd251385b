"""Every sequence of deliveries counts each child once and sends each callback once.

A stateful test drives the worker's :class:`WorkflowMiddleware` as a worker
would: children delivered in any order, again and again (duplicates, a
redelivery after a worker died past its commit), failing and retried,
failing on their last attempt, failing for good, and succeeding after a
redrive; the store's record and the callbacks sent follow the model.
"""

from __future__ import annotations

import contextlib
import typing as t

import pytest
from flask_sqs_jobs import Job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.workflows import WorkflowMiddleware
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant
from hypothesis.stateful import rule
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import run_state_machine_as_test

SETTINGS = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
CHILDREN = 3
MAX_ATTEMPTS = 3


class Sent:
    """A stand-in for ``SQSJobs``: its store, and the jobs it sent (committed)."""

    def __init__(self, store: SQLAlchemyStore) -> None:
        self.store = store
        self.handlers: dict[str, t.Any] = {}
        self.jobs: list[tuple[str, dict[str, t.Any], str]] = []

    def parts(self, app: object = None) -> Sent:
        return self

    def outbox_store(self) -> SQLAlchemyStore:
        return self.store

    def enqueue(
        self, queue: str, job_type: str, payload: dict[str, t.Any], **options: t.Any
    ) -> str:
        session = options.pop("session", None)
        if session is None:
            self.jobs.append((job_type, payload, options["job_id"]))
        else:
            # Sent only if the transaction commits, as the outbox sends it.
            from sqlalchemy import event

            sent = (job_type, payload, options["job_id"])
            event.listen(session, "after_commit", lambda s: self.jobs.append(sent))
        return str(options["job_id"])

    def enqueue_many(
        self, queue: str, specs: list[dict[str, t.Any]], **_: t.Any
    ) -> list[str]:
        return [spec["job_id"] for spec in specs]


def machine(sent: Sent) -> type[RuleBasedStateMachine]:
    from flask_sqs_jobs.workflows._batches import Batch
    from flask_sqs_jobs.workflows._records import read_batch

    class BatchDeliveries(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            sent.jobs.clear()
            signature = _signature("child", {"key": "k"})
            callbacks = {
                name: _signature("callback", {})
                for name in ("on_success", "on_complete", "on_failure")
            }
            batch = Batch(t.cast(t.Any, sent), [signature] * CHILDREN, **callbacks)
            enqueued = batch.enqueue()
            self.batch_id, self.job_ids = enqueued.batch_id, enqueued.job_ids
            #: child -> "succeeded" / "failed", once it has a final outcome.
            self.final: dict[int, str] = {}
            self.ever_failed = False
            self.middleware = WorkflowMiddleware(sent)

        def _deliver(
            self, child: int, receive_count: int, error: Exception | None
        ) -> None:
            job = Job(
                job_type="child",
                payload={"key": "k"},
                queue="default",
                correlation_fields={"workflow_batch_id": self.batch_id},
                job_id=self.job_ids[child],
                receive_count=receive_count,
                max_attempts=MAX_ATTEMPTS,
            )

            def handler(job: Job) -> None:
                if error is not None:
                    raise error

            if error is None:
                self.middleware.consume(job, handler)
                return
            with pytest.raises(type(error)) as raised:
                self.middleware.consume(job, handler)
            assert raised.value is error

        @rule(
            child=st.integers(0, CHILDREN - 1),
            receive_count=st.integers(1, MAX_ATTEMPTS),
        )
        def succeed(self, child: int, receive_count: int) -> None:
            self._deliver(child, receive_count, None)
            self.final[child] = "succeeded"

        @rule(
            child=st.integers(0, CHILDREN - 1),
            receive_count=st.integers(1, MAX_ATTEMPTS - 1),
        )
        def fail_and_retry(self, child: int, receive_count: int) -> None:
            self._deliver(child, receive_count, RuntimeError("again"))

        @rule(child=st.integers(0, CHILDREN - 1), last=st.booleans())
        def fail_for_good(self, child: int, last: bool) -> None:
            error = RuntimeError("last attempt") if last else NonRetryableError("no")
            self._deliver(child, MAX_ATTEMPTS if last else 1, error)
            if child not in self.final:
                self.final[child] = "failed"
                self.ever_failed = True

        @invariant()
        def counts_and_callbacks_follow_the_model(self) -> None:
            record = read_batch(sent.store.engine, self.batch_id)
            assert record is not None
            statuses = list(self.final.values())
            assert record.pending == CHILDREN - len(self.final)
            assert record.succeeded == statuses.count("succeeded")
            assert record.failed == statuses.count("failed")
            names = [job_id.rpartition(".")[2] for _, _, job_id in sent.jobs]
            assert all(names.count(name) <= 1 for name in names), names
            done = len(self.final) == CHILDREN
            assert ("on_complete" in names) == done
            assert ("on_success" in names) == (done and "failed" not in statuses)
            assert ("on_failure" in names) == self.ever_failed
            for _, payload, _ in sent.jobs:
                assert payload == {"batch_id": self.batch_id}
            assert sorted(record.callbacks_sent) == sorted(names)

    return BatchDeliveries


def _signature(job_type: str, payload: dict[str, t.Any]) -> t.Any:
    from flask_sqs_jobs.workflows import Signature

    return Signature(job_type, "default", payload)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_every_sequence_counts_each_child_once_and_sends_each_callback_once(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: t.Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flask_sqs_jobs.workflows import _batches

    # Two count rows for three children: one row has two, one has one.
    monkeypatch.setattr(_batches, "SHARDS", 2)
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = t.cast(str, request.getfixturevalue("postgres_url"))
    store = SQLAlchemyStore(url)
    store.create_tables()
    try:
        run_state_machine_as_test(machine(Sent(store)), settings=SETTINGS)
    finally:
        store.close()


def test_children_delivered_many_times_at_once_send_each_callback_once(
    postgres_url: str,
) -> None:
    """Threads count the same children at the same time on PostgreSQL."""
    import threading

    from flask_sqs_jobs.workflows._batches import Batch
    from flask_sqs_jobs.workflows._records import read_batch

    store = SQLAlchemyStore(postgres_url)
    store.create_tables()
    sent = Sent(store)
    children, copies = 40, 3
    callbacks = {
        name: _signature("callback", {})
        for name in ("on_success", "on_complete", "on_failure")
    }
    batch = Batch(
        t.cast(t.Any, sent), [_signature("child", {"key": "k"})] * children, **callbacks
    ).enqueue()
    middleware = WorkflowMiddleware(sent)
    start = threading.Barrier(8)
    work = [(n, copy) for n in range(children) for copy in range(copies)]
    lock = threading.Lock()

    def deliver() -> None:
        start.wait()
        while True:
            with lock:
                if not work:
                    return
                n, copy = work.pop()
            job = Job(
                job_type="child",
                payload={},
                queue="default",
                correlation_fields={"workflow_batch_id": batch.batch_id},
                job_id=batch.job_ids[n],
                receive_count=copy + 1,
                max_attempts=copies,
            )

            def handler(job: Job, n: int = n) -> None:
                if n % 10 == 0:
                    raise NonRetryableError("every tenth child fails")

            with contextlib.suppress(NonRetryableError):
                middleware.consume(job, handler)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record = read_batch(store.engine, batch.batch_id)
    store.close()
    assert record is not None
    assert (record.pending, record.succeeded, record.failed) == (0, 36, 4)
    names = sorted(job_id.rpartition(".")[2] for _, _, job_id in sent.jobs)
    assert names == ["on_complete", "on_failure"]
