"""SQLAlchemyStore: the job store in a SQL database (SQLite or PostgreSQL)."""

from __future__ import annotations

import threading
import typing as t

try:
    import sqlalchemy as sa
    import sqlalchemy.event
    import sqlalchemy.orm
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'SQLAlchemyStore needs the "sqlalchemy" extra:'
        ' pip install "flask-sqs-jobs[sqlalchemy]" (and "flask-sqs-jobs[postgres]"'
        " for PostgreSQL)"
    ) from exc

from ..model import JobStore
from . import _tables
from ._idempotency import SQLIdempotencyKeys
from ._limits import SQLLimits
from ._unique_keys import SQLUniqueKeys

if t.TYPE_CHECKING:
    from ..model import JobRecords
    from ..model import WorkerRegistry
    from ._cancellations import SQLCancellations
    from ._ticks import SQLScheduleTicks

#: How long SQLite waits for another writer's lock before failing (ms).
_SQLITE_BUSY_TIMEOUT_MS = 30_000


class SQLAlchemyStore(JobStore):
    """The job store in a SQL database, through SQLAlchemy 2.

    :param bind: a SQLAlchemy URL (``"sqlite:///instance/jobs.db"``,
        ``"postgresql+psycopg://..."``), an :class:`~sqlalchemy.engine.Engine`,
        or a Flask-SQLAlchemy ``db`` (its engine is looked up in the current
        app context on first use, so the outbox shares the app's database).

    Tables are prefixed ``sqs_jobs_`` and live on :attr:`metadata`; create
    them with :meth:`create_tables` or ``flask sqs-jobs store init``. A SQLite
    file is opened in WAL mode with a busy timeout, so the web process and
    the worker can share it.

    One store is shared by every thread of the process (web requests, the
    worker's slots, the relay, the record writer); its parts are made per
    caller and hold no lock, so the only lock here guards the first lookup
    of a Flask-SQLAlchemy engine. Each process has its own connection pool:
    hundreds of processes need the database's connection limit (or a pooler
    such as PgBouncer) sized for them.

    :raises ValueError: ``bind`` is not a database URL, or names an in-memory
        SQLite database.
    :raises TypeError: ``bind`` is none of the three.
    """

    kind = "sqlalchemy"
    #: The store's tables, for ``alembic``'s ``target_metadata``.
    metadata: t.ClassVar[sa.MetaData] = _tables.metadata

    def __init__(self, bind: str | sa.engine.URL | sa.Engine | t.Any) -> None:
        self._lock = threading.Lock()
        self._engine: sa.Engine | None = None
        self._db: t.Any = None
        if isinstance(bind, sa.Engine):
            self._engine = bind
        elif isinstance(bind, str | sa.engine.URL):
            try:
                url = sa.engine.make_url(bind)
            except sa.exc.ArgumentError as exc:
                raise ValueError(
                    f"not a SQLAlchemy database URL: {str(bind)!r} ({exc}); use e.g."
                    " 'sqlite:///instance/jobs.db' or"
                    " 'postgresql+psycopg://user@host/dbname'"
                ) from None
            self._engine = _create_engine(url)
        elif hasattr(type(bind), "engine") and hasattr(bind, "session"):
            # Looked up on the type: Flask-SQLAlchemy's ``db.engine`` needs an
            # app context, and the store may be built before there is one.
            self._db = bind
        else:
            raise TypeError(
                "SQLAlchemyStore takes a database URL, a SQLAlchemy Engine or a"
                f" Flask-SQLAlchemy db; got {type(bind).__name__}"
            )

    @property
    def engine(self) -> sa.Engine:
        """The engine; for a Flask-SQLAlchemy ``db``, that of the current app.

        Looked up once, under the store's lock (the first call needs an app
        context); every later call, from any thread, reads it without a lock.
        """
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = self._db.engine
        return self._engine

    def session(self) -> sa.orm.Session:
        """A new session on the store's engine (the caller closes it).

        Used by the schedule ticks and for ``current_job.session``;
        objects stay loaded after commit (``expire_on_commit=False``).
        """
        return sa.orm.Session(self.engine, expire_on_commit=False)

    def idempotency_keys(self) -> SQLIdempotencyKeys:
        """The ``sqs_jobs_idempotency`` table, for idempotent handlers."""
        return SQLIdempotencyKeys(lambda: self.engine)

    def cancellations(self) -> SQLCancellations:
        """The ``sqs_jobs_cancellations`` table: tombstones of cancelled jobs."""
        from ._cancellations import SQLCancellations

        return SQLCancellations(lambda: self.engine)

    def unique_keys(self) -> SQLUniqueKeys:
        """The ``sqs_jobs_unique_keys`` table, for unique jobs."""
        return SQLUniqueKeys(lambda: self.engine)

    def limits(self) -> SQLLimits:
        """The ``sqs_jobs_limit_*`` tables, for handlers with ``limits=[...]``."""
        return SQLLimits(lambda: self.engine)

    def create_tables(self) -> list[str]:
        """Create the ``sqs_jobs_`` tables that are missing; keep the others.

        Run by ``flask sqs-jobs store init``; returns one line per table. It
        never alters an existing table: schema changes go through Alembic (or
        by hand), and a table made by an older version that lacks columns is
        reported with the ``ALTER TABLE`` statements that add them.
        """
        inspector = sa.inspect(self.engine)
        existing = set(inspector.get_table_names())
        self.metadata.create_all(self.engine, checkfirst=True)
        lines: list[str] = []
        for name, table in self.metadata.tables.items():
            if name not in existing:
                lines.append(f"{name}: created")
                continue
            have = {column["name"] for column in inspector.get_columns(name)}
            missing = [column for column in table.columns if column.name not in have]
            if not missing:
                lines.append(f"{name}: exists, unchanged")
                continue
            dialect = self.engine.dialect
            statements = "; ".join(
                f"ALTER TABLE {name} ADD COLUMN {column.name}"
                f" {column.type.compile(dialect)}"
                for column in missing
            )
            lines.append(
                f"{name}: exists, unchanged, but lacks"
                f" {', '.join(c.name for c in missing)} (made by an older version):"
                f" add them with {statements}"
            )
        return lines

    def job_records(self, *, retention_seconds: float = 604800) -> JobRecords:
        """The ``sqs_jobs_jobs`` table (pruned by the workers, not by TTL).

        :raises RuntimeError: the database is neither SQLite nor PostgreSQL.
        """
        from ._records import SQLJobRecords

        return SQLJobRecords(self.engine)

    def worker_registry(self) -> WorkerRegistry:
        """The ``sqs_jobs_workers`` table.

        :raises RuntimeError: the database is neither SQLite nor PostgreSQL.
        """
        from ._workers import SQLWorkerRegistry

        return SQLWorkerRegistry(self.engine)

    def schedule_ticks(self) -> SQLScheduleTicks:
        """The ``sqs_jobs_schedule_ticks`` table, for periodic jobs."""
        from ._ticks import SQLScheduleTicks

        return SQLScheduleTicks(self.session)

    def close(self) -> None:
        """Dispose of an engine the store made; an app's engine is the app's."""
        if self._engine is not None and self._db is None:
            self._engine.dispose()

    def describe(self) -> str:
        """The database URL with its password hidden, for logs and the CLI."""
        return self.engine.url.render_as_string(hide_password=True)


def _create_engine(url: sa.engine.URL) -> sa.Engine:
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise ValueError(
            f"the job store needs a SQLite file, not {url.database or ''!r}: an"
            " in-memory database is private to one process, so the worker would"
            " never see the web process's jobs. Use e.g. 'sqlite:///instance/jobs.db'"
        )
    engine = sa.create_engine(url)
    if url.get_backend_name() == "sqlite":
        _share_sqlite(engine)
    return engine


def _share_sqlite(engine: sa.Engine) -> None:
    """Set SQLite up for several processes: WAL, a busy timeout, BEGIN IMMEDIATE.

    Only for engines the store creates from a URL: an engine or ``db`` the app
    passes in is used as the app configured it.
    """

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: t.Any, record: t.Any) -> None:
        # pysqlite's own transaction handling defers BEGIN and breaks
        # SAVEPOINT; issue BEGIN ourselves (SQLAlchemy's documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        if connection.get_execution_options().get(_tables.READ_ONLY_OPTION):
            connection.exec_driver_sql("BEGIN")  # a read: no write lock
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
