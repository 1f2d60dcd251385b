"""Priority levels: ``priority=`` at enqueue, one queue per level, weighted polling."""

from __future__ import annotations

import contextlib
import json
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import current_job
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.sqs import parse_queue_definitions
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def app_config(app_config: dict[str, t.Any], sqs: SQSClient) -> dict[str, t.Any]:
    for level in range(3):
        create_queue(sqs, f"app-reports-p{level}")
    queues = {
        **app_config["SQS_JOBS_QUEUES"],
        "reports": {"name": "app-reports", "priority_levels": 3},
    }
    return {**app_config, "SQS_JOBS_QUEUES": queues}


@pytest.fixture
def app(make_app: MakeApp) -> t.Iterator[Flask]:
    app = make_app()
    with app.app_context():
        yield app


def _on(sqs: SQSClient, name: str) -> list[dict[str, t.Any]]:
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in messages.get("Messages", [])]


def test_a_queue_with_levels_is_one_queue_per_level_weighted_by_powers_of_two() -> None:
    parsed = parse_queue_definitions(
        {
            "reports": {"name": "app-reports", "priority_levels": 3, "weight": 2},
            "orders": {"name": "orders.fifo", "priority_levels": 2},
        }
    )
    assert {name: (d.name, d.weight) for name, d in parsed.items()} == {
        "reports-p0": ("app-reports-p0", 8),
        "reports-p1": ("app-reports-p1", 4),
        "reports-p2": ("app-reports-p2", 2),
        "orders-p0": ("orders-p0.fifo", 2),
        "orders-p1": ("orders-p1.fifo", 1),
    }
    assert parse_queue_definitions(parsed) == parsed  # parsed once, kept as is


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"name": "q", "priority_levels": 1}, "'priority_levels' must be an int 2..8"),
        ({"name": "q", "priority_levels": 9}, "'priority_levels' must be an int 2..8"),
        ({"name": "q", "priority_levels": "2"}, "'priority_levels' must be an int"),
        (
            {"url": "https://sqs.example/1/q", "priority_levels": 2},
            "needs 'name', not 'url'",
        ),
    ],
)
def test_bad_priority_levels_are_refused_naming_the_queue(
    definition: dict[str, t.Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parse_queue_definitions({"reports": definition})
    assert "queue 'reports'" in str(error.value)


def test_priority_sends_to_its_level_and_the_middle_level_by_default(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    jobs.enqueue("reports", "build", {"n": 0}, priority=0)
    jobs.enqueue("reports", "build", {"n": 2}, priority=2)
    jobs.enqueue("reports", "build", {"n": 1})
    jobs.enqueue_many("reports", [("build", {"n": 10})])

    assert [b["payload"] for b in _on(sqs, "app-reports-p0")] == [{"n": 0}]
    assert sorted(b["payload"]["n"] for b in _on(sqs, "app-reports-p1")) == [1, 10]
    assert [b["payload"] for b in _on(sqs, "app-reports-p2")] == [{"n": 2}]


@pytest.mark.parametrize(
    ("queue", "priority", "error", "message"),
    [
        ("reports", 3, ValueError, r"priority must be 0\.\.2 for queue 'reports'"),
        ("reports", -1, ValueError, r"priority must be 0\.\.2"),
        ("reports", "high", TypeError, "priority must be an int level"),
        ("reports", True, TypeError, "priority must be an int level"),
        ("default", 0, ValueError, "queue 'default' has no priority levels"),
    ],
)
def test_a_bad_priority_is_refused_before_anything_is_sent(
    queue: str,
    priority: object,
    error: type[Exception],
    message: str,
    app: Flask,
    jobs: SQSJobs,
    sqs: SQSClient,
    queue_urls: dict[str, str],
) -> None:
    with pytest.raises(error, match=message):
        jobs.enqueue(queue, "build", {}, priority=t.cast(int, priority))
    assert message_count(sqs, queue_urls["default"]) == 0
    assert not any(_on(sqs, f"app-reports-p{level}") for level in range(3))


def test_backlogged_levels_are_served_by_weight_and_the_lowest_drains(
    app: Flask, jobs: SQSJobs
) -> None:
    ran: list[int] = []
    jobs.handler("build")(lambda payload: ran.append(payload["level"]))
    per_level = 150
    for _ in range(per_level):
        for level in (0, 2):
            jobs.enqueue("reports", "build", {"level": level}, priority=level)

    # Level 0 weighs 4, level 2 weighs 1 (level 1 is empty): 4 to 1.
    work_off(app, queues=["reports"], max_jobs=per_level)
    first = ran[:per_level]
    high = first.count(0)
    # Expected 120 of 150 (sd about 5): far from both 75 (no priority) and 150.
    assert 100 <= high <= 140, high
    assert first.count(2) > 0  # never starved

    work_off(app, queues=["reports"])
    assert sorted(ran) == [0] * per_level + [2] * per_level


def test_eager_mode_runs_a_job_of_any_level(
    make_app: MakeApp, app_config: dict[str, t.Any], jobs: SQSJobs
) -> None:
    app = make_app({**app_config, "SQS_JOBS_EAGER": True})
    ran: list[str] = []
    jobs.handler("build")(lambda payload: ran.append(current_job.queue))
    with app.app_context():
        jobs.enqueue("reports", "build", {}, priority=0)
        jobs.enqueue("reports", "build", {})
    assert ran == ["reports-p0", "reports-p1"]


def test_stats_shows_each_level(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "stats", "--json"])
    assert result.exit_code == 0, result.output
    names = [entry["queue"] for entry in json.loads(result.output)["queues"]]
    assert names == ["default", "critical", "reports-p0", "reports-p1", "reports-p2"]


def test_the_outbox_sends_to_the_level_of_priority(
    sqs: SQSClient, tmp_path: t.Any
) -> None:
    with _outbox_app(sqs, tmp_path, "box") as (jobs, session):
        jobs.enqueue("box", "build", {"n": 0}, priority=0, session=session)
        jobs.enqueue("box", "build", {"n": 1}, session=session)
    assert [b["payload"] for b in _on(sqs, "box-p0")] == [{"n": 0}]
    assert [b["payload"] for b in _on(sqs, "box-p1")] == [{"n": 1}]


def test_enqueue_many_sends_each_job_to_the_level_of_its_priority(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    ids = jobs.enqueue_many(
        "reports",
        [
            {"job_type": "build", "payload": {"n": 0}, "priority": 2},
            ("build", {"n": 1}),
            {"job_type": "build", "payload": {"n": 2}, "priority": 0},
            {"job_type": "build", "payload": {"n": 3}, "priority": 2},
        ],
    )

    bodies = {
        level: {m["MessageId"]: json.loads(m["Body"]) for m in _messages(sqs, level)}
        for level in range(3)
    }
    # Message ids come back in input order, whichever level each job went to.
    assert [bodies[2][ids[0]]["payload"], bodies[2][ids[3]]["payload"]] == [
        {"n": 0},
        {"n": 3},
    ]
    assert bodies[1][ids[1]]["payload"] == {"n": 1}
    assert bodies[0][ids[2]]["payload"] == {"n": 2}
    assert sum(len(b) for b in bodies.values()) == 4


def test_a_task_batch_with_a_priority_goes_to_that_level(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    @jobs.task(queue="reports")
    def build(n: int) -> None: ...

    build.options(priority=0).enqueue_many([{"n": 1}, {"n": 2}])

    assert sorted(b["payload"]["n"] for b in _on(sqs, "app-reports-p0")) == [1, 2]
    assert not _on(sqs, "app-reports-p1")


def test_a_batch_with_one_bad_priority_sends_nothing_and_names_the_job(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    with pytest.raises(ValueError, match=r"jobs\[1\]: priority must be 0\.\.2"):
        jobs.enqueue_many(
            "reports",
            [
                {"job_type": "build", "payload": {}, "priority": 0},
                {"job_type": "build", "payload": {}, "priority": 7},
            ],
        )
    assert not any(_on(sqs, f"app-reports-p{level}") for level in range(3))


def test_a_level_that_refuses_its_jobs_fails_only_them_in_input_order(
    app: Flask, jobs: SQSJobs, sqs: SQSClient
) -> None:
    from flask_sqs_jobs import EnqueueBatchError

    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="app-reports-p0")["QueueUrl"])
    with pytest.raises(EnqueueBatchError) as error:
        jobs.enqueue_many(
            "reports",
            [
                {"job_type": "build", "payload": {"n": 0}, "priority": 0},
                {"job_type": "build", "payload": {"n": 1}, "priority": 1},
                {"job_type": "build", "payload": {"n": 2}, "priority": 0},
            ],
        )

    assert [index for index, _ in error.value.enqueued] == [1]
    assert [index for index, *_ in error.value.failed] == [0, 2]
    assert [b["payload"] for b in _on(sqs, "app-reports-p1")] == [{"n": 1}]


def test_the_outbox_sends_a_batch_to_the_levels_of_its_priorities(
    sqs: SQSClient, tmp_path: t.Any
) -> None:
    with _outbox_app(sqs, tmp_path, "many") as (jobs, session):
        jobs.enqueue_many(
            "many",
            [
                {"job_type": "build", "payload": {"n": 0}, "priority": 0},
                {"job_type": "build", "payload": {"n": 1}, "priority": 1},
            ],
            session=session,
        )
    assert [b["payload"] for b in _on(sqs, "many-p0")] == [{"n": 0}]
    assert [b["payload"] for b in _on(sqs, "many-p1")] == [{"n": 1}]


@contextlib.contextmanager
def _outbox_app(
    sqs: SQSClient, tmp_path: t.Any, queue: str
) -> t.Iterator[tuple[SQSJobs, t.Any]]:
    """An app whose two-level ``queue`` has an outbox: what is enqueued in the
    session is committed and relayed when the block ends."""
    import sqlalchemy as sa
    import sqlalchemy.orm
    from flask_sqs_jobs.store.outbox import flush_all

    for level in range(2):
        create_queue(sqs, f"{queue}-p{level}")
    store_url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={queue: {"name": queue, "priority_levels": 2}},
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    jobs.store(app).create_tables()
    engine = sa.create_engine(store_url)
    try:
        with app.app_context(), sa.orm.Session(engine) as session:
            yield jobs, session
            session.commit()
            assert flush_all()
    finally:
        engine.dispose()
        jobs.store(app).close()


def _messages(sqs: SQSClient, level: int) -> list[dict[str, t.Any]]:
    url = sqs.get_queue_url(QueueName=f"app-reports-p{level}")["QueueUrl"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [dict(message) for message in received.get("Messages", [])]
