"""Building a store and creating its tables, on SQLite and PostgreSQL."""

from __future__ import annotations

import pathlib

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore


def test_create_tables_is_idempotent_and_says_what_it_did(store_url: str) -> None:
    store = SQLAlchemyStore(store_url)
    first = store.create_tables()
    assert all(line.endswith(": created") for line in first)
    assert {line.split(":")[0] for line in first} == set(
        SQLAlchemyStore.metadata.tables
    )
    second = store.create_tables()
    assert all(line.endswith(": exists, unchanged") for line in second)
    names = set(sa.inspect(store.engine).get_table_names())
    assert set(SQLAlchemyStore.metadata.tables) <= names
    assert all(name.startswith("sqs_jobs_") for name in SQLAlchemyStore.metadata.tables)
    store.close()


def test_a_table_of_an_older_version_is_reported_with_the_alter_that_fixes_it(
    store_url: str,
) -> None:
    new_columns = ("parked_at", "leased_until")  # added after 0.1.0's first outbox
    current = SQLAlchemyStore.metadata.tables["sqs_jobs_outbox"]
    old = sa.Table(
        "sqs_jobs_outbox",
        sa.MetaData(),
        *(
            sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
            for c in current.columns
            if c.name not in new_columns
        ),
    )
    store = SQLAlchemyStore(store_url)
    old.create(store.engine)
    lines = {line.split(":")[0]: line for line in store.create_tables()}
    report = lines["sqs_jobs_outbox"]
    assert "lacks parked_at, leased_until" in report
    statements = report.split("add them with ")[1].split("; ")
    assert [s.split()[5] for s in statements] == list(new_columns)
    with store.engine.begin() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)
    again = {line.split(":")[0]: line for line in store.create_tables()}
    assert again["sqs_jobs_outbox"] == "sqs_jobs_outbox: exists, unchanged"
    store.close()


def test_store_init_command_creates_the_tables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "q"}},
        SQS_JOBS_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}",
    )
    SQSJobs(app)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "store", "init"])
    assert result.exit_code == 0, result.output
    assert "sqs_jobs_outbox: created" in result.output
    again = app.test_cli_runner().invoke(args=["sqs-jobs", "store", "init"])
    assert "sqs_jobs_outbox: exists, unchanged" in again.output


def test_store_init_without_a_store_names_the_setting() -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    SQSJobs(app)
    result = app.test_cli_runner().invoke(args=["sqs-jobs", "store", "init"])
    assert result.exit_code == 2
    assert "SQS_JOBS_STORE_URL" in result.output


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///:memory:", "needs a SQLite file"),
        ("sqlite://", "needs a SQLite file"),
        ("not a url", "not a SQLAlchemy database URL"),
    ],
)
def test_bad_store_urls_are_refused_at_init_app(url: str, message: str) -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "q"}}, SQS_JOBS_STORE_URL=url
    )
    with pytest.raises(ValueError, match=message) as info:
        SQSJobs(app)
    assert "SQS_JOBS_STORE_URL" in str(info.value)


def test_features_needing_a_store_name_the_setting() -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    jobs = SQSJobs(app)
    with app.app_context(), pytest.raises(RuntimeError, match="SQS_JOBS_STORE_URL"):
        jobs.store()


def test_a_flask_sqlalchemy_db_is_accepted_before_any_app_context(
    tmp_path: pathlib.Path,
) -> None:
    from flask_sqlalchemy import SQLAlchemy

    db = SQLAlchemy()
    store = SQLAlchemyStore(db)  # no app context yet: the engine is looked up later
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path / 'app.db'}"
    db.init_app(app)
    with app.app_context():
        assert "sqs_jobs_outbox: created" in store.create_tables()
