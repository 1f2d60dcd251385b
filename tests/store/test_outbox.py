"""The outbox: ``enqueue(..., session=)``, the send after commit, the relay."""

from __future__ import annotations

import collections.abc as cabc
import json
import time
import typing as t

import boto3
import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import _rows as _outbox_rows
from flask_sqs_jobs.store.outbox import _write as _outbox
from flask_sqs_jobs.store.outbox._immediate import flush_all
from flask_sqs_jobs.store.outbox._relay import OutboxRelay

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Outbox(t.NamedTuple):
    app: Flask
    jobs: SQSJobs
    store: SQLAlchemyStore
    session: sa.orm.Session
    queue_url: str
    sqs: SQSClient


@pytest.fixture
def outbox(
    sqs: SQSClient, store_url: str, request: pytest.FixtureRequest
) -> cabc.Iterator[Outbox]:
    """An app with a store at ``store_url``, and a session of its own on it.

    Job records are off (their writer thread would outlive the test's store)
    unless the test is marked ``with_records``; such a test reads its records
    with ``jobs.get_job``, which waits for the writes.
    """
    url = create_queue(sqs, "outbox-default")
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "outbox-default"}},
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_RECORD_JOBS=request.node.get_closest_marker("with_records")
        is not None,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    store = t.cast(SQLAlchemyStore, jobs.store(app))
    store.create_tables()
    engine = sa.create_engine(store_url)
    session = sa.orm.Session(engine)
    with app.app_context():
        yield Outbox(app, jobs, store, session, url, sqs)
    flush_all()
    session.close()
    engine.dispose()
    store.close()


@pytest.fixture
def engine_of() -> cabc.Iterator[t.Callable[[str], sa.Engine]]:
    """Engines of the app's own (disposed of after the test)."""
    engines: list[sa.Engine] = []

    def make(url: str) -> sa.Engine:
        engines.append(sa.create_engine(url))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()


def received(sqs: SQSClient, url: str) -> list[dict[str, t.Any]]:
    """Every message on the queue now (bodies decoded), deleted as they are read."""
    bodies: list[dict[str, t.Any]] = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["MessageGroupId"],
        ).get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            body = json.loads(message["Body"])
            body["attributes"] = message.get("MessageAttributes", {})
            body["group"] = message.get("Attributes", {}).get("MessageGroupId")
            bodies.append(body)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def pending_rows(store: SQLAlchemyStore) -> list[sa.Row[t.Any]]:
    with store.engine.connect() as connection:
        return list(
            connection.execute(
                sa.select(_outbox_rows.outbox).order_by(_outbox_rows.outbox.c.id)
            )
        )


def test_a_commit_sends_the_job_once_with_its_job_id(outbox: Outbox) -> None:
    job_id = outbox.jobs.enqueue(
        "default", "welcome", {"user_id": 1}, session=outbox.session
    )
    count = sa.select(sa.func.count()).select_from(_outbox_rows.outbox)
    assert outbox.session.execute(count).scalar() == 1  # in the session's transaction
    outbox.session.commit()
    assert flush_all()
    bodies = received(outbox.sqs, outbox.queue_url)
    assert [(b["job_type"], b["payload"], b["job_id"]) for b in bodies] == [
        ("welcome", {"user_id": 1}, job_id)
    ]
    assert pending_rows(outbox.store) == []


def test_a_job_type_a_direct_enqueue_accepts_is_written_and_sent(
    outbox: Outbox,
) -> None:
    job_type = "jobs." + "long_name" * 40  # over 255 characters
    job_id = outbox.jobs.enqueue("default", job_type, {}, session=outbox.session)
    outbox.session.commit()  # PostgreSQL refused a varchar(255) overflow here
    assert flush_all()
    bodies = received(outbox.sqs, outbox.queue_url)
    assert [(b["job_type"], b["job_id"]) for b in bodies] == [(job_type, job_id)]


@pytest.mark.with_records
def test_the_send_reports_the_enqueue_to_signals_and_job_records(
    outbox: Outbox,
) -> None:
    from flask_sqs_jobs import signals

    seen: list[tuple[str | None, str, str]] = []

    def on_enqueued(sender: Flask, job: Job, queue: str, message_id: str) -> None:
        seen.append((job.job_id, queue, message_id))

    with signals.job_enqueued.connected_to(on_enqueued, outbox.app):
        job_id = outbox.jobs.enqueue(
            "default", "welcome", {"user_id": 1}, session=outbox.session
        )
        assert seen == []  # not before the commit
        outbox.session.commit()
        assert flush_all()
    sent = outbox.sqs.receive_message(QueueUrl=outbox.queue_url)["Messages"]
    assert seen == [(job_id, "default", sent[0]["MessageId"])]
    record = outbox.jobs.get_job(job_id)
    assert record is not None
    assert (record.status, record.job_type, record.queue) == (
        "queued",
        "welcome",
        "default",
    )


def test_nothing_is_in_sqs_before_the_commit(outbox: Outbox) -> None:
    outbox.jobs.enqueue("default", "welcome", {}, session=outbox.session)
    outbox.session.flush()
    assert flush_all()
    assert received(outbox.sqs, outbox.queue_url) == []
    outbox.session.commit()


def test_a_rollback_sends_nothing_not_even_with_a_later_commit(outbox: Outbox) -> None:
    outbox.jobs.enqueue("default", "rolled_back", {}, session=outbox.session)
    outbox.session.rollback()
    outbox.session.commit()  # a commit that runs no SQL
    outbox.session.rollback()  # a rollback that runs no SQL
    with outbox.session.begin_nested():
        outbox.jobs.enqueue("default", "in_savepoint", {}, session=outbox.session)
        outbox.session.rollback()  # only the savepoint
    kept = outbox.jobs.enqueue("default", "kept", {}, session=outbox.session)
    outbox.session.commit()
    assert flush_all()
    bodies = received(outbox.sqs, outbox.queue_url)
    assert [(b["job_type"], b["job_id"]) for b in bodies] == [("kept", kept)]
    assert pending_rows(outbox.store) == []


def test_enqueue_many_writes_every_job_and_returns_their_ids(outbox: Outbox) -> None:
    ids = outbox.jobs.enqueue_many(
        "default",
        [("a", {"n": 1}), {"job_type": "b", "payload": {"n": 2}, "job_id": "b-2"}],
        session=outbox.session,
    )
    assert ids[1] == "b-2"
    outbox.session.commit()
    assert flush_all()
    bodies = received(outbox.sqs, outbox.queue_url)
    assert sorted((b["job_type"], b["job_id"]) for b in bodies) == [
        ("a", ids[0]),
        ("b", "b-2"),
    ]


def test_a_bad_job_is_refused_before_anything_is_written(outbox: Outbox) -> None:
    with pytest.raises(ValueError, match=r"jobs\[1\]: .*delay_seconds"):
        outbox.jobs.enqueue_many(
            "default",
            [("a", {}), {"job_type": "b", "delay_seconds": -1}],
            session=outbox.session,
        )
    with pytest.raises(TypeError, match="payload must be a dict"):
        outbox.jobs.enqueue("default", "a", [1], session=outbox.session)  # type: ignore[arg-type]
    outbox.session.commit()
    assert pending_rows(outbox.store) == []


class Stamp(JobMiddleware):
    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        job.trace_headers["traceparent"] = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        return call_next(job)


def test_the_job_is_encoded_as_a_send_would(
    sqs: SQSClient,
    store_url: str,
    tmp_path: t.Any,
    engine_of: t.Callable[[str], sa.Engine],
) -> None:
    create_queue(sqs, "outbox-mw")
    url = sqs.get_queue_url(QueueName="outbox-mw")["QueueUrl"]
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_RECORD_JOBS=False,  # see the outbox fixture
        SQS_JOBS_QUEUES={"default": {"name": "outbox-mw"}},
        SQS_JOBS_STORE_URL=store_url,
    )
    jobs = SQSJobs(app, boto_client=sqs, middleware=[Stamp()])
    store = jobs.store(app)
    store.create_tables()
    session = sa.orm.Session(engine_of(store_url))
    with app.test_request_context(headers={"X-Request-ID": "req-7"}):
        job_id = jobs.enqueue(
            "default",
            "welcome",
            {"user_id": 1},
            correlation_fields={"tenant": "acme"},
            session=session,
        )
        session.commit()
    assert flush_all()
    (body,) = received(sqs, url)
    assert body["job_id"] == job_id
    fields = json.loads(body["attributes"]["correlation_fields"]["StringValue"])
    assert fields == {"request_id": "req-7", "tenant": "acme"}
    assert body["attributes"]["traceparent"]["StringValue"].startswith("00-111")
    session.close()
    store.close()


def test_a_failed_send_after_commit_is_logged_and_left_to_the_relay(
    outbox: Outbox, monkeypatch: pytest.MonkeyPatch, log_events: list[t.Any]
) -> None:
    queue = outbox.jobs.queue_group().queue("default")

    def refuse(entries: list[dict[str, t.Any]]) -> t.NoReturn:
        raise ConnectionError("SQS is unreachable")

    monkeypatch.setattr(queue, "send_batch", refuse)
    job_id = outbox.jobs.enqueue("default", "welcome", {}, session=outbox.session)
    outbox.session.commit()  # does not raise
    assert flush_all()
    (row,) = pending_rows(outbox.store)
    assert row.attempts == 1
    assert "SQS is unreachable" in row.last_error
    assert row.available_at > row.created_at
    failed = [e for e in log_events if e["event"] == "outbox_send_failed"]
    assert failed[0]["job_ids"] == [job_id]
    # The session still works.
    outbox.session.execute(sa.text("SELECT 1"))
    outbox.session.commit()

    monkeypatch.undo()
    relay = OutboxRelay(outbox.store.engine, outbox.jobs.queue_group())
    deadline = time.monotonic() + 10
    while relay.run_pass() == 0:  # until its back-off (one second) is over
        assert time.monotonic() < deadline, "the relay never retried the row"
        time.sleep(0.05)
    assert [b["job_id"] for b in received(outbox.sqs, outbox.queue_url)] == [job_id]
    assert pending_rows(outbox.store) == []


def test_a_relay_failure_backs_off_each_time_longer_and_keeps_the_row(
    outbox: Outbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "sender_for", _no_immediate_send)
    outbox.jobs.enqueue("default", "welcome", {}, session=outbox.session)
    outbox.session.commit()
    queue = outbox.jobs.queue_group().queue("default")
    monkeypatch.setattr(queue, "send_batch", lambda entries: [("Throttled", "slow")])
    relay = OutboxRelay(outbox.store.engine, outbox.jobs.queue_group())
    assert relay.drain() == 1  # handled once, then backing off
    (row,) = pending_rows(outbox.store)
    assert (row.attempts, row.last_error) == (1, "Throttled: slow")
    with outbox.store.engine.begin() as connection:
        connection.execute(
            sa.update(_outbox_rows.outbox).values(available_at=row.created_at)
        )
    assert relay.run_pass() == 1
    (row,) = pending_rows(outbox.store)
    assert row.attempts == 2
    assert (row.available_at - row.created_at).total_seconds() >= 2


class _Dropped:
    def submit(self, rows: list[t.Any]) -> None:
        pass  # the process died before its immediate send


def _no_immediate_send(engine: sa.Engine, group: t.Any) -> _Dropped:
    return _Dropped()


@pytest.fixture
def fifo_app(outbox: Outbox) -> cabc.Iterator[Flask]:
    """An app on a FIFO queue, sharing ``outbox``'s store."""
    create_queue(outbox.sqs, "outbox-order.fifo", fifo=True)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_RECORD_JOBS=False,  # see the outbox fixture
        SQS_JOBS_QUEUES={"orders": {"name": "outbox-order.fifo"}},
    )
    SQSJobs(app, boto_client=outbox.sqs, store=outbox.store)
    with app.app_context():
        yield app


@pytest.fixture
def fifo(fifo_app: Flask, monkeypatch: pytest.MonkeyPatch) -> Flask:
    """The same, whose jobs only the relay sends."""
    monkeypatch.setattr(_outbox, "sender_for", _no_immediate_send)
    return fifo_app


def test_the_send_after_commit_never_overtakes_a_waiting_row_of_its_group(
    outbox: Outbox, fifo_app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = fifo_app.extensions["sqs_jobs"]
    queue = jobs.queue_group().queue("orders")
    url = outbox.sqs.get_queue_url(QueueName="outbox-order.fifo")["QueueUrl"]

    def enqueue(group: str, n: int) -> None:
        jobs.enqueue(
            "orders", "step", {"n": n}, message_group_id=group, session=outbox.session
        )

    with monkeypatch.context() as patch:
        patch.setattr(queue, "send_batch", lambda entries: [("Throttled", "slow")])
        enqueue("a", 1)
        outbox.session.commit()
        assert flush_all()
    enqueue("a", 2)
    enqueue("b", 3)
    outbox.session.commit()
    assert flush_all()
    assert [b["payload"]["n"] for b in received(outbox.sqs, url)] == [3]
    relay = OutboxRelay(outbox.store.engine, jobs.queue_group())
    deadline = time.monotonic() + 10
    sent: list[int] = []
    while len(sent) < 2:  # until the first row's back-off (one second) is over
        assert time.monotonic() < deadline, f"the relay sent only {sent}"
        relay.run_pass(include_fresh=True)
        sent += [b["payload"]["n"] for b in received(outbox.sqs, url)]
        time.sleep(0.05)
    assert sent == [1, 2]


def test_the_relay_keeps_fifo_order_per_group(outbox: Outbox, fifo: Flask) -> None:
    jobs = fifo.extensions["sqs_jobs"]
    written = []
    for n in range(30):
        group = "ab"[n % 2]
        job_id = jobs.enqueue(
            "orders", "step", {"n": n}, message_group_id=group, session=outbox.session
        )
        written.append((group, n, job_id))
    outbox.session.commit()
    relay = OutboxRelay(outbox.store.engine, jobs.queue_group(), claim_limit=7)
    assert relay.drain() == 30
    url = outbox.sqs.get_queue_url(QueueName="outbox-order.fifo")["QueueUrl"]
    bodies = received(outbox.sqs, url)
    for group in "ab":
        sent = [(b["payload"]["n"], b["job_id"]) for b in bodies if b["group"] == group]
        assert sent == [(n, j) for g, n, j in written if g == group]


def test_a_backing_off_row_holds_back_its_group_only(
    outbox: Outbox, fifo: Flask
) -> None:
    jobs = fifo.extensions["sqs_jobs"]
    for n, group in enumerate("aab"):
        jobs.enqueue(
            "orders", "step", {"n": n}, message_group_id=group, session=outbox.session
        )
    outbox.session.commit()
    first = pending_rows(outbox.store)[0]
    with outbox.store.engine.begin() as connection:
        _outbox_rows.mark_failed(connection, {first.id: (0, "Throttled")})
    relay = OutboxRelay(outbox.store.engine, jobs.queue_group())
    assert relay.drain() == 1
    url = outbox.sqs.get_queue_url(QueueName="outbox-order.fifo")["QueueUrl"]
    assert [b["payload"]["n"] for b in received(outbox.sqs, url)] == [2]
    assert len(pending_rows(outbox.store)) == 2


def test_fifo_jobs_deduplicate_by_job_id(outbox: Outbox, fifo: Flask) -> None:
    jobs = fifo.extensions["sqs_jobs"]
    jobs.enqueue(
        "orders",
        "step",
        {},
        message_group_id="g",
        job_id="order-1",
        session=outbox.session,
    )
    outbox.session.commit()
    (row,) = pending_rows(outbox.store)
    assert row.message_deduplication_id == "order-1"


def test_large_payloads_go_through_s3_at_send_time(
    sqs: SQSClient, store_url: str, engine_of: t.Callable[[str], sa.Engine]
) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="outbox-payloads")
    url = create_queue(sqs, "outbox-big")
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_RECORD_JOBS=False,  # see the outbox fixture
        SQS_JOBS_QUEUES={"default": {"name": "outbox-big"}},
        SQS_JOBS_STORE_URL=store_url,
        SQS_JOBS_LARGE_PAYLOADS={"bucket": "outbox-payloads", "always": True},
    )
    jobs = SQSJobs(app, boto_client=sqs, s3_client=s3)
    store = jobs.store(app)
    store.create_tables()
    session = sa.orm.Session(engine_of(store_url))
    with app.app_context():
        jobs.enqueue("default", "big", {"blob": "x" * 1000}, session=session)
        session.commit()
    assert flush_all()
    message = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert "PayloadS3Pointer" in message["Body"]
    assert s3.list_objects_v2(Bucket="outbox-payloads")["KeyCount"] == 1
    session.close()
    store.close()


def test_status_and_relay_once_commands(
    outbox: Outbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "sender_for", _no_immediate_send)
    for n in range(3):
        outbox.jobs.enqueue("default", "welcome", {"n": n}, session=outbox.session)
    outbox.session.commit()
    runner = outbox.app.test_cli_runner()
    status = runner.invoke(args=["sqs-jobs", "outbox", "status", "--json"])
    assert status.exit_code == 0, status.output
    report = json.loads(status.output)
    assert report["pending"] == 3
    assert report["queues"]["default"]["pending"] == 3
    assert 0 <= report["oldest_age_seconds"] < 60
    table = runner.invoke(args=["sqs-jobs", "outbox", "status"])
    assert "pending: 3" in table.output
    assert "default" in table.output
    relayed = runner.invoke(args=["sqs-jobs", "outbox", "relay", "--once"])
    assert relayed.exit_code == 0, relayed.output
    assert "sent 3 job(s)" in relayed.output
    assert len(received(outbox.sqs, outbox.queue_url)) == 3
    empty = json.loads(
        runner.invoke(args=["sqs-jobs", "outbox", "status", "--json"]).output
    )
    assert (empty["pending"], empty["oldest_age_seconds"]) == (0, 0)


def test_the_session_must_be_on_the_stores_database(
    outbox: Outbox, tmp_path: t.Any, engine_of: t.Callable[[str], sa.Engine]
) -> None:
    other = sa.orm.Session(engine_of(f"sqlite:///{tmp_path / 'other.db'}"))
    with pytest.raises(ValueError, match="must be on the job store's database"):
        outbox.jobs.enqueue("default", "welcome", {}, session=other)
    with pytest.raises(TypeError, match="must be a SQLAlchemy Session"):
        outbox.jobs.enqueue("default", "welcome", {}, session=object())


def test_a_scoped_session_works(
    outbox: Outbox, store_url: str, engine_of: t.Callable[[str], sa.Engine]
) -> None:
    scoped = sa.orm.scoped_session(sa.orm.sessionmaker(engine_of(store_url)))
    job_id = outbox.jobs.enqueue("default", "welcome", {}, session=scoped)
    scoped.commit()
    assert flush_all()
    assert [b["job_id"] for b in received(outbox.sqs, outbox.queue_url)] == [job_id]
    scoped.remove()


def test_without_a_sql_store_the_error_says_what_to_configure(
    sqs: SQSClient, tmp_path: t.Any, engine_of: t.Callable[[str], sa.Engine]
) -> None:
    session = sa.orm.Session(engine_of(f"sqlite:///{tmp_path / 'x.db'}"))
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    jobs = SQSJobs(app, boto_client=sqs)
    with app.app_context(), pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.enqueue("default", "welcome", {}, session=session)
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    dynamo = SQSJobs(app, boto_client=sqs, store=DynamoDBStore("jobs"))
    with (
        app.app_context(),
        pytest.raises(RuntimeError, match="needs a SQLAlchemyStore"),
    ):
        dynamo.enqueue("default", "welcome", {}, session=session)


def test_eager_mode_runs_the_job_after_the_commit_only(
    tmp_path: t.Any, engine_of: t.Callable[[str], sa.Engine]
) -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}}, SQS_JOBS_EAGER=True)
    jobs = SQSJobs(app)
    ran: list[str] = []

    @jobs.handler("welcome")
    def welcome(payload: dict[str, t.Any]) -> None:
        ran.append(payload["name"])

    session = sa.orm.Session(engine_of(f"sqlite:///{tmp_path / 'x.db'}"))
    with app.app_context():
        jobs.enqueue("default", "welcome", {"name": "dropped"}, session=session)
        session.rollback()
        jobs.enqueue("default", "welcome", {"name": "kept"}, session=session)
        ids = jobs.enqueue_many(
            "default", [("welcome", {"name": "many"})], session=session
        )
        assert ran == []
        session.commit()
    assert ran == ["kept", "many"]
    assert len(ids) == 1


@pytest.mark.parametrize("command", [["status"], ["relay", "--once"]])
def test_the_outbox_commands_without_a_store_name_the_setting(
    sqs: SQSClient, command: list[str]
) -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    SQSJobs(app, boto_client=sqs)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "outbox", *command])
    assert result.exit_code == 2
    assert "SQS_JOBS_STORE_URL" in result.output


def test_flask_sqlalchemy_db_session_with_the_store_on_db(
    sqs: SQSClient, store_url: str
) -> None:
    from flask_sqlalchemy import SQLAlchemy

    url = create_queue(sqs, "outbox-fsa")
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_RECORD_JOBS=False,  # see the outbox fixture
        SQS_JOBS_QUEUES={"default": {"name": "outbox-fsa"}},
        SQLALCHEMY_DATABASE_URI=store_url,
    )
    db = SQLAlchemy(app)
    with app.app_context():  # SQLAlchemyStore(db) looks at db.engine
        store = SQLAlchemyStore(db)
    jobs = SQSJobs(app, boto_client=sqs, store=store)
    with app.app_context():
        jobs.store().create_tables()
        with app.test_request_context(headers={"X-Request-ID": "req-9"}):
            job_id = jobs.enqueue("default", "welcome", {}, session=db.session)
            db.session.commit()
        assert flush_all()
        (body,) = received(sqs, url)
        assert body["job_id"] == job_id
        fields = json.loads(body["attributes"]["correlation_fields"]["StringValue"])
        assert fields == {"request_id": "req-9"}
        db.session.remove()
        db.engine.dispose()
