"""Helpers for testing an app that uses flask-sqs-jobs.

With ``SQS_JOBS_EAGER = True`` every enqueue runs its handler at once; these
helpers record what was enqueued and how each job ended::

    from flask_sqs_jobs.testing import record_enqueued

    def test_signup_sends_welcome_email(client, app):
        with record_enqueued(app) as jobs:
            client.post("/signup", data={"email": "ada@example.com"})
        assert [job.job_type for job in jobs] == ["send_welcome_email"]

Against moto or a local SQS server (eager mode off), :func:`work_off` runs a
worker in the test until the queues are empty.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import typing as t

from flask import Flask

from . import signals
from .engine.model import Job
from .engine.model import Outcome
from .engine.model import reset_trace_injectors

if t.TYPE_CHECKING:
    from ._extension import SQSJobs


@contextlib.contextmanager
def record_enqueued(app: Flask) -> cabc.Iterator[list[Job]]:
    """Record the jobs ``app`` enqueues inside the ``with`` block.

    Yields a list that fills with each :class:`~flask_sqs_jobs.Job` as it is
    sent (in eager mode too).
    """
    jobs: list[Job] = []

    def record(sender: Flask, *, job: Job, **extra: t.Any) -> None:
        jobs.append(job)

    with signals.job_enqueued.connected_to(record, sender=app):
        yield jobs


@dataclasses.dataclass(frozen=True)
class FinishedJob:
    """How one job ended, as recorded by :func:`record_finished`."""

    job: Job
    outcome: Outcome
    exception: BaseException | None
    #: What the handler returned (None when it raised or did not run).
    result: object = None
    #: Whether the job's message will come back to its queue.
    will_retry: bool = False


@contextlib.contextmanager
def record_finished(app: Flask) -> cabc.Iterator[list[FinishedJob]]:
    """Record every job of ``app`` that finishes inside the ``with`` block."""
    finished: list[FinishedJob] = []

    def record(
        sender: Flask,
        *,
        job: Job,
        outcome: Outcome,
        exception: BaseException | None,
        result: object = None,
        will_retry: bool = False,
        **extra: t.Any,
    ) -> None:
        finished.append(FinishedJob(job, outcome, exception, result, will_retry))

    with signals.job_finished.connected_to(record, sender=app):
        yield finished


def work_off(
    app: Flask,
    *,
    queues: cabc.Iterable[str] | None = None,
    max_jobs: int = 1000,
) -> list[FinishedJob]:
    """Run a worker in this thread until no queue has a visible message.

    For tests against moto or a local SQS server. Jobs run one at a time;
    returns how each ended.

    :param queues: logical names to work off (all by default).
    :param max_jobs: stop after this many jobs, so a job that keeps failing
        (and is redelivered at once) cannot loop forever.
    """
    jobs: SQSJobs = app.extensions["sqs_jobs"]
    if jobs.config(app).eager:
        raise RuntimeError(
            "work_off needs SQS (moto or a local server): with SQS_JOBS_EAGER on,"
            " jobs already ran when they were enqueued"
        )
    with record_finished(app) as finished:
        seen = -1
        idle_cycles = 0

        def should_stop() -> bool:
            nonlocal seen, idle_cycles
            idle_cycles = idle_cycles + 1 if len(finished) == seen else 0
            seen = len(finished)
            return idle_cycles >= 2

        worker = jobs.create_worker(
            app, queues=queues, idle_wait_seconds=0, should_stop=should_stop
        )
        done = 0

        def stop_at_max_jobs(sender: Flask, **extra: t.Any) -> None:
            # Stop from the job's own thread, before its slot frees: checking
            # in should_stop could let one more job start.
            nonlocal done
            done += 1
            if done >= max_jobs:
                worker.request_stop()

        with signals.job_finished.connected_to(stop_at_max_jobs, sender=app):
            worker.run()
    return finished


def send_outbox(app: Flask, timeout: float = 10.0) -> int:
    """Send what the app's transactional outbox holds now; return how many jobs.

    Jobs enqueued with ``session=`` are sent after the commit by a background
    thread: call this before :func:`work_off` so that they are on the queue.
    It waits for that thread, then relays whatever is left, as ``flask
    sqs-jobs outbox relay --once`` does.
    """
    from ._outbox_enqueue import outbox_store
    from .store.outbox import flush_all
    from .store.outbox import OutboxRelay

    jobs: SQSJobs = app.extensions["sqs_jobs"]
    flush_all(timeout)
    with app.app_context():
        relay = OutboxRelay(
            outbox_store(jobs, app).engine,
            jobs.queue_group(app),
            max_attempts=jobs.config(app).outbox_max_attempts,
        )
        return relay.drain()


def reset_tracing() -> None:
    """Forget which tracing middleware this process has enqueued with.

    A process may enqueue through one trace-injecting middleware only (a
    second one raises ``ValueError``). A test suite that tries, say,
    ``SentryMiddleware`` in one test and ``OTelMiddleware`` in another calls
    this between them (e.g. in an autouse fixture).
    """
    reset_trace_injectors()
