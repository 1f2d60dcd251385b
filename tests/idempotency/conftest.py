"""Fixtures for idempotent handlers: an app with a store, a worker in a thread."""

from __future__ import annotations

import collections.abc as cabc
import threading
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.engine import Outcome

from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Finished(Hooks):
    """Records every job's outcome; waits for a number of them."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str | None, Outcome]] = []
        self._cond = threading.Condition()

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
        **kwargs: t.Any,
    ) -> None:
        with self._cond:
            self.outcomes.append((job.job_id, outcome))
            self._cond.notify_all()

    def count(self) -> int:
        with self._cond:
            return len(self.outcomes)

    def wait_for(self, predicate: cabc.Callable[[], bool]) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, WAIT)

    def values(self) -> list[str]:
        with self._cond:
            return [outcome.value for _, outcome in self.outcomes]


@pytest.fixture
def dlq_url(sqs: SQSClient) -> str:
    return create_queue(sqs, "idem-dlq")


@pytest.fixture
def queue_url(sqs: SQSClient, dlq_url: str) -> str:
    return create_queue(sqs, "idem-jobs", visibility_timeout=3, dead_letter_url=dlq_url)


def make_store_app(jobs: SQSJobs, store_url: str, queue_name: str) -> Flask:
    """An app whose ``default`` queue is ``queue_name``, with a store and tables."""
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": queue_name}},
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
        SQS_JOBS_STORE_URL=store_url,
    )
    jobs.init_app(app)
    jobs.store(app).create_tables()
    return app


@pytest.fixture
def store_app(
    sqs: SQSClient, queue_url: str, store_url: str, jobs: SQSJobs
) -> cabc.Iterator[Flask]:
    """An app whose ``default`` queue has a DLQ, with a store."""
    app = make_store_app(jobs, store_url, "idem-jobs")
    yield app
    jobs.store(app).close()


class RunWorker(t.Protocol):
    def __call__(
        self,
        until: cabc.Callable[[Finished], bool],
        *,
        concurrency: int = 1,
        hooks: cabc.Sequence[Hooks] = (),
    ) -> Finished: ...


@pytest.fixture
def run_worker(store_app: Flask, jobs: SQSJobs) -> RunWorker:
    """Run a worker until ``until(finished)`` holds; return what finished."""

    def run(
        until: cabc.Callable[[Finished], bool],
        *,
        concurrency: int = 1,
        hooks: cabc.Sequence[Hooks] = (),
    ) -> Finished:
        finished = Finished()
        worker = jobs.create_worker(
            store_app,
            concurrency=concurrency,
            should_stop=lambda: until(finished),
            hooks=[finished, *hooks],
        )
        thread = WorkerThread(worker)
        finished.wait_for(lambda: until(finished))
        assert thread.join(WAIT * 3) == 0
        return finished

    return run
