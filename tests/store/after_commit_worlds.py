"""The three users of the after-commit helper, each as a small world a test drives.

A world is an app with one user of the helper (the outbox's send after commit,
eager mode's ``enqueue(..., session=)``, ``enqueue_after_commit``) and one
session on a database of its own (a plain ``Session`` or Flask-SQLAlchemy's
``db.session``). :meth:`World.enqueue` writes an app row and enqueues a job for
it in that session; :meth:`World.arrived` says which jobs reached SQS (or ran,
eager), and :meth:`World.committed_rows` which app rows the database kept.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import shutil
import tempfile
import typing as t
import uuid

import sqlalchemy as sa
import sqlalchemy.orm
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.contrib.sqlalchemy import enqueue_after_commit
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import flush_all

from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Where each user keeps its helper: (module, attribute).
HOLDERS = {
    "outbox": ("flask_sqs_jobs.store.outbox._write", "send_after_commit"),
    "eager": ("flask_sqs_jobs._outbox_enqueue", "run_eager_after_commit"),
    "enqueue_after_commit": ("flask_sqs_jobs.contrib.sqlalchemy", "held_jobs"),
}
USERS = tuple(HOLDERS)
SESSIONS = ("session", "flask_sqlalchemy")


def holder_module(user: str) -> tuple[t.Any, str]:
    module, attribute = HOLDERS[user]
    return importlib.import_module(module), attribute


def serializable_sqlite(engine: sa.Engine) -> None:
    """SQLAlchemy's recipe for SAVEPOINT on pysqlite: BEGIN issued by SQLAlchemy."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: t.Any, record: t.Any) -> None:
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN")


class World:
    """One user of the helper, one session, one database, one queue."""

    def __init__(
        self, user: str, session_kind: str, sqs: SQSClient, url: str | None = None
    ) -> None:
        self.user = user
        self.sqs = sqs
        self._dir = pathlib.Path(tempfile.mkdtemp(prefix="after-commit-"))
        url = url or f"sqlite:///{self._dir / 'app.db'}"
        name = f"after-commit-{uuid.uuid4().hex[:12]}"
        self.queue_url = create_queue(sqs, name)
        self.ran: list[int] = []
        self.received: list[int] = []
        app = self.app = Flask(__name__)
        app.config.update(
            SQS_JOBS_QUEUES={"default": {"name": name}},
            SQS_JOBS_EAGER=user == "eager",
            SQS_JOBS_RECORD_JOBS=False,
            SQLALCHEMY_DATABASE_URI=url,
        )
        self._context = app.app_context()
        self._context.push()
        self._db: t.Any = None
        if session_kind == "flask_sqlalchemy":
            from flask_sqlalchemy import SQLAlchemy

            self._db = SQLAlchemy(app)
            if url.startswith("sqlite"):
                serializable_sqlite(self._db.engine)
            store = SQLAlchemyStore(self._db)
            self.session: t.Any = self._db.session
        else:
            store = SQLAlchemyStore(url)  # BEGIN IMMEDIATE on SQLite
            self.session = sa.orm.Session(store.engine)
        self.store = store
        self.jobs = SQSJobs(app, boto_client=sqs, store=store)

        @self.jobs.handler("record")
        def record(payload: dict[str, t.Any]) -> None:
            self.ran.append(payload["n"])

        store.create_tables()
        with store.engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE app_rows (n INTEGER PRIMARY KEY)")

    def enqueue(self, n: int) -> None:
        """An app row and its job, in the session's current transaction."""
        self.session.execute(sa.text("INSERT INTO app_rows (n) VALUES (:n)"), {"n": n})
        if self.user == "enqueue_after_commit":
            enqueue_after_commit(self.session, "default", "record", {"n": n})
        else:
            self.jobs.enqueue("default", "record", {"n": n}, session=self.session)

    def arrived(self, *, settled: bool) -> list[int]:
        """The jobs that reached SQS (or ran) so far, each time it did, sorted.

        :param settled: the session is outside any transaction, so this waits
            for the outbox's sender (which may need the database's lock).
        """
        if self.user == "eager":
            return sorted(self.ran)
        if self.user == "outbox":
            if not settled:
                return sorted(self.received)  # the sender may be on its way
            assert flush_all(30)
        while messages := self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=300
        ).get("Messages", []):
            for message in messages:
                self.received.append(json.loads(message["Body"])["payload"]["n"])
        return sorted(self.received)

    def committed_rows(self) -> list[int]:
        """The app rows the database holds, read on a connection of its own."""
        with self.store.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT n FROM app_rows ORDER BY n")
            return [n for (n,) in rows]

    def close(self) -> None:
        flush_all(30)
        self.session.close()
        if self._db is not None:
            self._db.session.remove()
            self._db.engine.dispose()
        else:
            self.store.close()
        self._context.pop()
        shutil.rmtree(self._dir, ignore_errors=True)
