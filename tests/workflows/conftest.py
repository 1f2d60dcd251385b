"""An app with a SQL store and tasks for batches and chains, run by a worker here."""

from __future__ import annotations

import collections.abc as cabc
import threading
import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import flush_all

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Flow:
    """The app, its tasks, what they saw, and a worker run until a condition."""

    child: t.Any
    on_done: t.Any
    step: t.Any
    parent: t.Any

    def __init__(self, app: Flask, jobs: SQSJobs, sqs: SQSClient, urls: dict[str, str]):
        self.app, self.jobs, self.sqs, self.urls = app, jobs, sqs, urls
        self.lock = threading.Lock()
        self.calls: list[tuple[str, dict[str, t.Any]]] = []
        #: child key -> how many more attempts fail before it succeeds.
        self.failing: dict[str, int] = {}
        self.changed = threading.Condition(self.lock)

    def note(self, what: str, /, **kwargs: t.Any) -> None:
        with self.changed:
            self.calls.append((what, kwargs))
            self.changed.notify_all()

    def called(self, name: str) -> list[dict[str, t.Any]]:
        with self.lock:
            return [kwargs for called, kwargs in self.calls if called == name]

    def attempt(self, what: str, key: str) -> None:
        """Fail this attempt as ``failing`` says: -1 for good, n times, or not."""
        with self.lock:
            left = self.failing.get(key, 0)
            if left == -1:
                raise NonRetryableError(f"{what} {key} fails for good")
            if left:
                self.failing[key] = left - 1
                raise RuntimeError(f"{what} {key} fails this time")

    def run_until(self, done: cabc.Callable[[], bool], timeout: float = 60) -> None:
        """Run a worker in this thread until ``done()`` (or fail at the deadline)."""
        deadline = time.monotonic() + timeout

        def should_stop() -> bool:
            return done() or time.monotonic() > deadline

        worker = self.jobs.create_worker(
            self.app, should_stop=should_stop, concurrency=2
        )
        worker.run()
        assert done(), f"not done in {timeout} s; calls: {self.calls}"


@pytest.fixture
def flow(
    sqs: SQSClient, store_url: str, request: pytest.FixtureRequest
) -> cabc.Iterator[Flow]:
    """The app; it writes job records only in a test marked ``with_records``."""
    dlq = create_queue(sqs, "wf-default-dlq")
    urls = {
        "default": create_queue(
            sqs,
            "wf-default",
            visibility_timeout=30,
            dead_letter_url=dlq,
            max_receive_count=3,
        ),
        "dlq": dlq,
    }
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={
            "default": {"name": "wf-default", "retry_backoff_seconds": 0.01}
        },
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_RECORD_JOBS=request.node.get_closest_marker("with_records")
        is not None,
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    store = t.cast(SQLAlchemyStore, jobs.store(app))
    store.create_tables()
    state = Flow(app, jobs, sqs, urls)

    @jobs.task
    def child(key: str) -> str:
        state.note("child", key=key)
        state.attempt("child", key)
        return key.upper()

    @jobs.task
    def on_done(batch_id: str, label: str = "") -> None:
        state.note("on_done", batch_id=batch_id, label=label)

    @jobs.task
    def step(name: str, previous_result: t.Any = None) -> list[str]:
        state.note("step", name=name, previous_result=previous_result)
        state.attempt("step", name)
        return [*(previous_result or []), name]

    @jobs.task
    def parent(key: str) -> None:
        state.note("parent", key=key, batch_id=current_job.batch_id)
        current_job.batch.add(child.s(key=f"{key}-more"))

    state.child, state.on_done, state.step = child, on_done, step
    state.parent = parent
    with app.app_context():
        yield state
    flush_all()
    store.close()
