"""``enqueue_after_commit`` on every way a transaction ends, and on failed sends."""

from __future__ import annotations

import collections.abc as cabc
import pathlib
import threading
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.contrib.sqlalchemy import enqueue_after_commit
from flask_sqs_jobs.engine import Job
from flask_sqs_jobs.testing import record_enqueued
from sqlalchemy import orm

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


@pytest.fixture
def app(sqs: SQSClient) -> cabc.Iterator[Flask]:
    url = create_queue(sqs, "jobs")
    gone = create_queue(sqs, "gone")
    sqs.delete_queue(QueueUrl=gone)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": url}, "gone": {"url": gone}},
    )
    SQSJobs(app, boto_client=sqs)
    with app.app_context():
        yield app


@pytest.fixture
def engine(tmp_path: pathlib.Path) -> cabc.Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as connection:
        connection.execute(sa.text("create table users (id integer primary key)"))
    yield engine
    engine.dispose()


@pytest.fixture
def session(app: Flask, engine: sa.Engine) -> cabc.Iterator[orm.Session]:
    with orm.Session(engine) as session:
        yield session


@pytest.fixture
def sent(app: Flask) -> cabc.Iterator[list[Job]]:
    with record_enqueued(app) as jobs:
        yield jobs


def job_types(jobs: list[Job]) -> list[str]:
    return [job.job_type for job in jobs]


def user_ids(engine: sa.Engine) -> list[int]:
    with engine.connect() as connection:
        return list(connection.scalars(sa.text("select id from users order by id")))


def hold_and_raise(
    session: orm.Session,
    block: t.ContextManager[object],
    job_type: str,
    user_id: int | None = None,
) -> None:
    """Inside ``block``: insert a user (if given), hold a job, then raise."""
    with block:
        if user_id is not None:
            session.execute(sa.text(f"insert into users (id) values ({user_id})"))
        enqueue_after_commit(session, "default", job_type)
        raise ZeroDivisionError


def test_a_rollback_that_ran_no_sql_drops_the_job(
    session: orm.Session, sent: list[Job]
) -> None:
    enqueue_after_commit(session, "default", "dropped")
    session.rollback()
    enqueue_after_commit(session, "default", "kept")
    session.commit()
    assert job_types(sent) == ["kept"]


def test_a_begin_block_that_raised_drops_the_job(
    app: Flask, engine: sa.Engine, sent: list[Job]
) -> None:
    with orm.Session(engine) as session:
        with pytest.raises(ZeroDivisionError):
            hold_and_raise(session, session.begin(), "dropped")
        with session.begin():
            enqueue_after_commit(session, "default", "kept")
    assert job_types(sent) == ["kept"]


def test_a_closed_session_drops_what_it_held(
    engine: sa.Engine, sent: list[Job]
) -> None:
    session = orm.Session(engine)
    session.execute(sa.text("insert into users (id) values (1)"))
    enqueue_after_commit(session, "default", "dropped")
    session.close()
    session.commit()
    assert job_types(sent) == []
    assert user_ids(engine) == []


def test_a_rolled_back_savepoint_drops_only_the_jobs_held_inside_it(
    engine: sa.Engine, session: orm.Session, sent: list[Job]
) -> None:
    session.execute(sa.text("insert into users (id) values (1)"))
    enqueue_after_commit(session, "default", "outer")
    with pytest.raises(ZeroDivisionError):
        hold_and_raise(session, session.begin_nested(), "inner", user_id=2)
    with session.begin_nested():
        enqueue_after_commit(session, "default", "released")
    assert job_types(sent) == []
    session.commit()
    assert job_types(sent) == ["outer", "released"]
    assert user_ids(engine) == [1]


def test_a_released_savepoint_sends_nothing_before_the_commit(
    session: orm.Session, sent: list[Job]
) -> None:
    with session.begin_nested():
        enqueue_after_commit(session, "default", "inner")
    assert job_types(sent) == []
    session.rollback()
    session.commit()
    assert job_types(sent) == []


def test_the_job_id_is_returned_at_once_and_sent(
    session: orm.Session, sent: list[Job]
) -> None:
    chosen = enqueue_after_commit(session, "default", "a", job_id="order-7")
    drawn = enqueue_after_commit(session, "default", "b")
    assert chosen == "order-7"
    session.commit()
    assert [job.job_id for job in sent] == ["order-7", drawn]


def test_a_bad_job_id_is_refused_when_held(session: orm.Session) -> None:
    with pytest.raises(ValueError, match="job_id must be"):
        enqueue_after_commit(session, "default", "a", job_id="not valid")


def test_a_failed_send_is_logged_and_the_other_jobs_still_leave(
    engine: sa.Engine,
    session: orm.Session,
    sent: list[Job],
    log_events: list[EventDict],
) -> None:
    session.execute(sa.text("insert into users (id) values (1)"))
    enqueue_after_commit(session, "default", "first")
    failing = enqueue_after_commit(session, "gone", "charge\x1b[2J")
    enqueue_after_commit(session, "default", "third")
    session.commit()

    assert job_types(sent) == ["first", "third"]
    assert user_ids(engine) == [1]
    [failure] = [e for e in log_events if e["event"] == "job_send_failed"]
    assert failure["queue"] == "gone"
    assert failure["job_type"] == "charge\\x1b[2J"
    assert failure["job_id"] == failing
    assert failure["log_level"] == "error"


def test_the_session_stays_usable_after_a_failed_send(
    engine: sa.Engine, session: orm.Session, sent: list[Job]
) -> None:
    enqueue_after_commit(session, "gone", "lost")
    session.commit()
    session.execute(sa.text("insert into users (id) values (2)"))
    enqueue_after_commit(session, "default", "next")
    session.commit()
    assert user_ids(engine) == [2]
    assert job_types(sent) == ["next"]


def test_a_scoped_session_holds_jobs_on_its_current_session(
    engine: sa.Engine, sent: list[Job]
) -> None:
    scoped = orm.scoped_session(orm.sessionmaker(engine))
    enqueue_after_commit(scoped, "default", "dropped")
    scoped.rollback()
    enqueue_after_commit(scoped, "default", "kept")
    scoped.commit()
    scoped.remove()
    assert job_types(sent) == ["kept"]


def test_a_commit_outside_the_app_context_still_sends(
    engine: sa.Engine, sent: list[Job]
) -> None:
    """A thread of its own has no app context: the job's app is pushed to send it."""
    session = orm.Session(engine)
    enqueue_after_commit(session, "default", "later")
    worker = threading.Thread(target=session.commit)
    worker.start()
    worker.join(timeout=30)
    session.close()
    assert job_types(sent) == ["later"]
