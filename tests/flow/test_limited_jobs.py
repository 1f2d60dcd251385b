"""Handlers with limits: a job a limit refuses does not run, and comes back later."""

from __future__ import annotations

import pathlib
import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import ConcurrencyLimit
from flask_sqs_jobs import current_job
from flask_sqs_jobs import RateLimit
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.contrib.prometheus import PrometheusMetrics
from flask_sqs_jobs.engine import JobHandler
from flask_sqs_jobs.engine import JobWorker
from flask_sqs_jobs.engine import Outcome
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import SpyClient
from tests.engine.helpers import visibility_changes
from tests.engine.helpers import WAIT
from tests.engine.helpers import WorkerThread
from tests.engine.test_worker_counts import samples
from tests.idempotency.conftest import Finished
from tests.idempotency.conftest import make_store_app
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def queues(sqs: SQSClient) -> tuple[str, str]:
    """A queue that dead-letters on the second receive, and its DLQ."""
    dlq = create_queue(sqs, "limits-dlq")
    url = create_queue(
        sqs,
        "limits-jobs",
        visibility_timeout=3,
        dead_letter_url=dlq,
        max_receive_count=1,
    )
    return url, dlq


def run(
    app: Flask, jobs: SQSJobs, until: t.Callable[[Finished], bool], **options: t.Any
) -> Finished:
    finished = Finished()
    worker = jobs.create_worker(
        app,
        should_stop=lambda: until(finished),
        hooks=[finished, *options.pop("hooks", ())],
        **options,
    )
    thread = WorkerThread(worker)
    assert finished.wait_for(lambda: until(finished))
    assert thread.join(WAIT * 3) == 0
    return finished


def succeeded(finished: Finished) -> bool:
    return "success" in finished.values()


def test_a_job_without_a_free_permit_waits_then_runs_without_burning_receives(
    sqs: SQSClient, queues: tuple[str, str], store_url: str, jobs: SQSJobs
) -> None:
    ran: list[int] = []

    @jobs.task(limits=[ConcurrencyLimit("db", 1)])
    def report(n: int) -> None:
        ran.append(n)

    app = make_store_app(jobs, store_url, "limits-jobs")
    limits = jobs.store(app).limits()
    # Another worker's job holds the only permit.
    slot = limits.acquire_permit("db", "", 1, "elsewhere", 600)
    assert slot is not None
    with app.app_context():
        job_id = report.enqueue(n=1).job_id
    metrics = PrometheusMetrics()

    def refused_then_freed(finished: Finished) -> bool:
        values = finished.values()
        if values.count("limited") >= 2 and slot is not None:
            limits.release_permit("db", "", slot, "elsewhere")
        return succeeded(finished)

    finished = run(app, jobs, refused_then_freed, hooks=[metrics])

    assert ran == [1]
    values = finished.values()
    assert values[-1] == "success"
    assert set(values[:-1]) == {"limited"}
    # Limited twice on a queue whose maxReceiveCount is 1, and not dead-lettered:
    # each wait sent the job again, so its receive count started again.
    assert message_count(sqs, queues[1]) == 0
    assert {job for job, _ in finished.outcomes} == {job_id}
    counted = samples(metrics)
    assert counted[("sqs_jobs_limited_total", frozenset({("limit", "db")}))] >= 2
    jobs.store(app).close()


def test_a_limited_job_is_recorded_as_limited(
    queues: tuple[str, str], store_url: str, jobs: SQSJobs
) -> None:
    @jobs.task(limits=[RateLimit("stripe", 1, per=3600)])
    def charge(n: int) -> None:
        pass

    app = make_store_app(jobs, store_url, "limits-jobs")
    with app.app_context():
        first = charge.enqueue(n=1).job_id
        second = charge.enqueue(n=2).job_id

    def both_seen(finished: Finished) -> bool:
        return len(finished.outcomes) >= 2

    finished = run(app, jobs, both_seen)

    assert sorted(o.value for _, o in finished.outcomes[:2]) == ["limited", "success"]
    limited = next(job for job, o in finished.outcomes if o is Outcome.LIMITED)
    assert limited in (first, second)
    deadline = time.monotonic() + WAIT
    record = None
    while time.monotonic() < deadline:
        record = jobs.get_job(limited, app=app)
        if record is not None and record.status == "limited":
            break
        time.sleep(0.05)
    assert record is not None
    assert record.status == "limited"
    assert record.error is None
    jobs.store(app).close()


def test_a_running_job_keeps_its_permit_past_the_lease_through_the_heartbeat(
    queues: tuple[str, str], store_url: str, jobs: SQSJobs
) -> None:
    seen: list[int | None] = []

    app: Flask

    @jobs.task(limits=[ConcurrencyLimit("slow", 1, lease_seconds=1.5)])
    def slow() -> None:
        # Past three leases, another holder never gets the permit.
        limits = jobs.store(app).limits()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            seen.append(limits.acquire_permit("slow", "", 1, "other", 600))
            time.sleep(0.25)

    app = make_store_app(jobs, store_url, "limits-jobs")
    with app.app_context():
        slow.enqueue()

    run(app, jobs, succeeded)

    assert seen
    assert set(seen) == {None}
    # Returned at settle: free for the next job at once.
    limits = jobs.store(app).limits()
    assert limits.acquire_permit("slow", "", 1, "next", 600) is not None
    jobs.store(app).close()


def test_eager_mode_runs_a_limited_job_at_once(
    jobs: SQSJobs, tmp_path: pathlib.Path
) -> None:
    ran: list[int] = []

    @jobs.task(limits=[RateLimit("stripe", 1, per=3600)])
    def charge(n: int) -> None:
        ran.append(n)

    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "jobs"}},
        SQS_JOBS_EAGER=True,
        SQS_JOBS_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}",
    )
    jobs.init_app(app)
    jobs.store(app).create_tables()
    with app.app_context():
        charge.enqueue(n=1)
        charge.enqueue(n=2)

    assert ran == [1, 2]
    jobs.store(app).close()


def test_handlers_with_limits_need_a_store(jobs: SQSJobs) -> None:
    @jobs.handler("charge", limits=[RateLimit("stripe", 100, per=1)])
    def charge(payload: dict[str, t.Any]) -> None:
        pass

    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "jobs"}})
    with pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL") as raised:
        jobs.init_app(app)
    assert "'charge'" in str(raised.value)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (RateLimit("a", 1), "must be a list"),
        (["a"], "neither a RateLimit nor a ConcurrencyLimit"),
        ([RateLimit("a", 1), ConcurrencyLimit("a", 1)], "a name of its own"),
    ],
)
def test_bad_limits_are_refused_at_registration(
    jobs: SQSJobs, limits: t.Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):

        @jobs.task(limits=limits)
        def task() -> None:
            pass


def test_on_a_fifo_queue_a_limited_job_waits_in_place_counting_receives(
    sqs: SQSClient, tmp_path: pathlib.Path
) -> None:
    dlq = create_queue(sqs, "limits-dlq.fifo", fifo=True)
    url = create_queue(
        sqs, "limits.fifo", fifo=True, visibility_timeout=3, dead_letter_url=dlq,
        max_receive_count=5,
    )  # fmt: skip
    spy = SpyClient(sqs)
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    limits = store.limits()
    slot = limits.acquire_permit("db", "", 1, "elsewhere", 600)
    assert slot is not None
    ran: list[int | None] = []
    finished = Finished()

    def freed_after_two_waits() -> bool:
        if finished.values().count("limited") >= 2:
            limits.release_permit("db", "", slot, "elsewhere")
        return "success" in finished.values()

    group = one_queue_group(spy.client, url)
    group.enqueue("jobs", "report", {}, message_group_id="g")
    worker = JobWorker(
        group,
        {"report": JobHandler(
            lambda payload: ran.append(current_job.receive_count),
            limits=(ConcurrencyLimit("db", 1),),
        )},
        should_stop=freed_after_two_waits,
        idle_wait_seconds=0,
        hooks=[finished],
        limit_store=limits,
    )  # fmt: skip
    thread = WorkerThread(worker)
    assert finished.wait_for(freed_after_two_waits)
    assert thread.join(WAIT * 3) == 0

    # The message stayed in place (no new send), its visibility set each
    # time: each wait counted one receive, as docs/flow-control.md says.
    assert ran == [3]
    assert len(spy.calls_to("send_message")) == 1  # the enqueue
    assert len([s for s in visibility_changes(spy) if s >= 1]) >= 2
    assert message_count(sqs, dlq) == 0
    store.close()


def test_a_worker_refuses_a_handler_whose_limits_are_not_limits(
    sqs: SQSClient, tmp_path: pathlib.Path
) -> None:
    url = create_queue(sqs, "limits-bad")
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    handler = JobHandler(lambda payload: None, limits=("stripe",))

    with pytest.raises(ValueError, match="neither a RateLimit nor a ConcurrencyLimit"):
        JobWorker(
            one_queue_group(sqs, url), {"charge": handler}, limit_store=store.limits()
        )
    store.close()
