"""``enqueue_after_commit``: jobs leave with the transaction, or not at all."""

from __future__ import annotations

import collections.abc as cabc
import pathlib
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.contrib.sqlalchemy import enqueue_after_commit
from flask_sqs_jobs.testing import record_enqueued
from flask_sqs_jobs.testing import work_off
from sqlalchemy import orm

from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Base(orm.DeclarativeBase):
    pass


@pytest.fixture
def app_and_db(
    sqs: SQSClient, tmp_path: pathlib.Path
) -> cabc.Iterator[tuple[Flask, SQLAlchemy, str]]:
    url = create_queue(sqs, "jobs")
    app = Flask(__name__)
    app.config.update(
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'app.db'}",
        SQS_JOBS_QUEUES={"default": {"url": url}},
    )
    db = SQLAlchemy(app, model_class=Base)
    SQSJobs(app, boto_client=sqs)
    with app.app_context():
        db.session.execute(sa.text("create table users (id integer primary key)"))
        db.session.commit()
        yield app, db, url


def test_the_job_is_sent_when_the_session_commits(
    app_and_db: tuple[Flask, SQLAlchemy, str], sqs: SQSClient
) -> None:
    app, db, url = app_and_db
    with record_enqueued(app) as sent:
        db.session.execute(sa.text("insert into users (id) values (1)"))
        enqueue_after_commit(db.session, "default", "welcome", {"user_id": 1})
        assert sent == []
        assert message_count(sqs, url) == 0
        db.session.commit()
    assert [job.payload for job in sent] == [{"user_id": 1}]
    assert message_count(sqs, url) == 1


def test_the_job_is_dropped_when_the_session_rolls_back(
    app_and_db: tuple[Flask, SQLAlchemy, str], sqs: SQSClient
) -> None:
    _, db, url = app_and_db
    db.session.execute(sa.text("insert into users (id) values (2)"))
    enqueue_after_commit(db.session, "default", "welcome", {"user_id": 2})
    db.session.rollback()
    db.session.commit()
    assert message_count(sqs, url) == 0


def test_each_transaction_sends_only_its_own_jobs(
    app_and_db: tuple[Flask, SQLAlchemy, str], sqs: SQSClient
) -> None:
    app, db, url = app_and_db
    with record_enqueued(app) as sent:
        enqueue_after_commit(db.session, "default", "first")
        enqueue_after_commit(db.session, "default", "second")
        db.session.commit()
        enqueue_after_commit(db.session, "default", "third")
        db.session.commit()
        db.session.commit()
    assert [job.job_type for job in sent] == ["first", "second", "third"]
    assert message_count(sqs, url) == 3


def test_each_worker_job_gets_its_own_database_session(
    app_and_db: tuple[Flask, SQLAlchemy, str],
) -> None:
    """The app context pushed per job removes Flask-SQLAlchemy's session after it."""
    app, db, _ = app_and_db
    jobs: SQSJobs = app.extensions["sqs_jobs"]
    sessions: list[orm.Session] = []

    @jobs.handler("use_db")
    def use_db(payload: dict[str, t.Any]) -> None:
        session = db.session()
        session.execute(sa.text("select 1"))
        sessions.append(session)

    jobs.enqueue("default", "use_db")
    jobs.enqueue("default", "use_db")
    outcomes = [finished.outcome for finished in work_off(app)]

    assert outcomes == ["success", "success"]
    assert sessions[0] is not sessions[1]
    assert db.session() not in sessions


def test_a_rollback_of_the_flask_session_that_ran_no_sql_drops_the_job(
    app_and_db: tuple[Flask, SQLAlchemy, str], sqs: SQSClient
) -> None:
    _, db, url = app_and_db
    enqueue_after_commit(db.session, "default", "welcome", {"user_id": 3})
    db.session.rollback()
    db.session.commit()
    assert message_count(sqs, url) == 0
