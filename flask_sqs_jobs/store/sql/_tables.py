"""The tables of :class:`SQLAlchemyStore`, on their own ``MetaData``.

Every table is prefixed ``sqs_jobs_``. Alembic users add
``SQLAlchemyStore.metadata`` to their ``target_metadata`` list;
``docs/guarantees.md`` describes each table.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import datetime as dt
import typing as t

import sqlalchemy as sa


class UTCDateTime(sa.TypeDecorator[dt.datetime]):
    """An aware UTC datetime on every database (SQLite keeps no time zone).

    SQLite stores the naive UTC text, PostgreSQL a ``timestamptz``; either
    way every value read back is aware and in UTC, so the stores' parts
    compare times from any process the same way.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: dt.datetime | None, dialect: sa.Dialect
    ) -> dt.datetime | None:
        """``value`` in UTC (naive on SQLite).

        :raises ValueError: ``value`` is naive: its zone would be a guess.
        """
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a naive datetime cannot be stored: {value!r}")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: t.Any, dialect: sa.Dialect
    ) -> dt.datetime | None:
        """An aware UTC datetime; a naive one (SQLite) is read as UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            return t.cast(dt.datetime, value.replace(tzinfo=dt.UTC))
        return t.cast(dt.datetime, value.astimezone(dt.UTC))


#: A 64-bit id, autoincrementing on SQLite too (which only does so for INTEGER).
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

#: Jobs written in the caller's transaction, waiting to be sent to SQS.
outbox = sa.Table(
    "sqs_jobs_outbox",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    #: The logical queue name (a key of SQS_JOBS_QUEUES).
    sa.Column("queue", sa.String(255), nullable=False),
    sa.Column("job_id", sa.String(128), nullable=False),
    #: Unbounded, as a direct enqueue's job type is (only SQS's size limit).
    sa.Column("job_type", sa.Text(), nullable=False),
    #: The message body exactly as it will be sent.
    sa.Column("body", sa.Text(), nullable=False),
    #: The message attributes, as JSON in SendMessage's shape.
    sa.Column("message_attributes", sa.Text(), nullable=True),
    sa.Column("message_group_id", sa.String(128), nullable=True),
    sa.Column("message_deduplication_id", sa.String(128), nullable=True),
    sa.Column("delay_seconds", sa.Integer(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    #: The relay leaves a row alone until then (backoff after a failed send).
    sa.Column("available_at", UTCDateTime(), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("last_error", sa.Text(), nullable=True),
    #: A debounced job's key: one row per key, its send time moved by each
    #: enqueue (``debounce=``); NULL for every other row.
    sa.Column("debounce_key", sa.String(255), nullable=True),
    #: When the row was parked (too many failed sends, unreadable, or by
    #: hand): the relay no longer sends it; its ``available_at`` is then
    #: ``PARKED_UNTIL``, so the claim's index range never reaches it.
    sa.Column("parked_at", UTCDateTime(), nullable=True),
    #: Until when the send after commit holds the row on SQLite (no row locks):
    #: ``outbox relay --once`` leaves such a row alone too.
    sa.Column("leased_until", UTCDateTime(), nullable=True),
    sa.Index("sqs_jobs_outbox_available_at", "available_at", "id"),
    sa.Index("sqs_jobs_outbox_debounce_key", "debounce_key", unique=True),
    #: FIFO order: the relay looks up the earlier rows of a message group.
    sa.Index("sqs_jobs_outbox_group", "message_group_id", "id"),
)

#: Idempotency keys: in progress (with a lease) or completed (until expires_at).
idempotency = sa.Table(
    "sqs_jobs_idempotency",
    metadata,
    sa.Column("key", sa.String(255), primary_key=True),
    #: ``in_progress`` or ``completed``.
    sa.Column("status", sa.String(16), nullable=False),
    #: SHA-256 of the payload's canonical JSON: the same key with another
    #: payload is a conflict.
    sa.Column("payload_hash", sa.String(64), nullable=False),
    sa.Column("job_id", sa.String(128), nullable=False),
    #: Who holds the in-progress lease; only its holder completes or relinquishes it.
    sa.Column("token", sa.String(64), nullable=False),
    sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
    #: When a completed key is forgotten (idempotency_ttl_seconds after completion).
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    #: The handler's JSON return value (at most 64 KiB).
    sa.Column("result", sa.Text(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Index("sqs_jobs_idempotency_expires_at", "expires_at"),
)

#: Ticks of periodic jobs, one row per (schedule, tick): the claim that makes
#: exactly one worker enqueue it (in the transaction of its outbox row). The
#: latest row of a schedule is what ``catch_up`` reads; older rows are pruned.
schedule_ticks = sa.Table(
    "sqs_jobs_schedule_ticks",
    metadata,
    sa.Column("schedule", sa.String(64), primary_key=True),
    sa.Column("tick", UTCDateTime(), primary_key=True),
    sa.Column("job_id", sa.String(128), nullable=False),
    sa.Column("claimed_at", UTCDateTime(), nullable=False),
)

#: One row per job: its latest status, times, result and progress.
jobs = sa.Table(
    "sqs_jobs_jobs",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("job_type", sa.String(255), nullable=False),
    #: The logical queue name.
    sa.Column("queue", sa.String(255), nullable=False),
    #: ``queued``, ``running``, ``succeeded``, ``retrying``, ``failed``,
    #: ``dead_lettered``, ``deferred``, ``duplicate``, ``expired`` or ``cancelled``.
    sa.Column("status", sa.String(16), nullable=False),
    #: The receive count of the job's latest delivery (0 while queued).
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("enqueued_at", UTCDateTime(), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    #: The handler's JSON return value, as JSON text.
    sa.Column("result", sa.Text(), nullable=True),
    #: ``ErrorType: message`` of the latest failure (bounded, escaped).
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("progress", sa.Float(), nullable=True),
    sa.Column("progress_message", sa.Text(), nullable=True),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    #: A failed or dead-lettered job's payload, as JSON text (at most 64 KiB).
    sa.Column("payload", sa.Text(), nullable=True),
    sa.Index("sqs_jobs_jobs_updated_at", "updated_at"),
    sa.Index("sqs_jobs_jobs_status_updated_at", "status", "updated_at"),
    sa.Index("sqs_jobs_jobs_queue_updated_at", "queue", "updated_at"),
    sa.Index("sqs_jobs_jobs_job_type_updated_at", "job_type", "updated_at"),
)

#: The tags of job records, one row per (job, tag). ``updated_at`` follows
#: the record's, so a search by tag walks one index range newest first.
job_tags = sa.Table(
    "sqs_jobs_job_tags",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("tag", sa.String(64), primary_key=True),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Index("sqs_jobs_job_tags_tag_updated_at", "tag", "updated_at"),
    sa.Index("sqs_jobs_job_tags_updated_at", "updated_at"),
)

#: Jobs finished per minute, queue and status: the dashboard's charts read
#: these instead of the records. Each record write that finishes a job adds
#: one, in the write's transaction; ``shard`` spreads the writers of a busy
#: minute over several rows (each process writes its own).
minute_counts = sa.Table(
    "sqs_jobs_minute_counts",
    metadata,
    sa.Column("minute", UTCDateTime(), primary_key=True),
    sa.Column("queue", sa.String(255), primary_key=True),
    sa.Column("status", sa.String(16), primary_key=True),
    sa.Column("shard", sa.SmallInteger(), primary_key=True, autoincrement=False),
    sa.Column("count", sa.BigInteger(), nullable=False),
)

#: Tombstones of cancelled jobs (``jobs.cancel``), pruned by the next cancel.
cancellations = sa.Table(
    "sqs_jobs_cancellations",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("cancelled_at", UTCDateTime(), nullable=False),
    sa.Index("sqs_jobs_cancellations_cancelled_at", "cancelled_at"),
)

#: Live workers, each refreshed every 15 seconds and removed on a graceful stop.
workers = sa.Table(
    "sqs_jobs_workers",
    metadata,
    #: ``host:pid:random``.
    sa.Column("worker_id", sa.String(255), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
    #: The logical queue names it polls, as a JSON list.
    sa.Column("queues", sa.Text(), nullable=False),
    sa.Column("concurrency", sa.Integer(), nullable=False),
    sa.Column("busy_slots", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("last_seen_at", UTCDateTime(), nullable=False),
    #: The flask-sqs-jobs version it runs.
    sa.Column("version", sa.String(64), nullable=False),
)


@contextlib.contextmanager
def one_statement(engine: sa.Engine) -> cabc.Iterator[sa.Connection]:
    """A connection for one statement, atomic on its own.

    On PostgreSQL in autocommit mode: one round trip instead of three
    (``BEGIN``, the statement, ``COMMIT``). SQLite keeps the store's
    ``BEGIN IMMEDIATE`` transaction, which takes the write lock at once.
    """
    with _connection(engine, read_only=False) as connection:
        yield connection


#: The execution option that makes the store's SQLite engine begin a read's
#: transaction deferred (``BEGIN``), without the write lock.
READ_ONLY_OPTION = "sqs_jobs_read_only"


@contextlib.contextmanager
def reading(engine: sa.Engine) -> cabc.Iterator[sa.Connection]:
    """A connection for reads that takes no lock a writer waits for.

    On PostgreSQL in autocommit mode: each read one round trip, with no
    ``BEGIN`` and ``ROLLBACK`` around it. On SQLite a deferred transaction: the
    store's engine otherwise begins with ``BEGIN IMMEDIATE``, which takes the
    database's write lock, so a read on a job's thread (its cancellation, say)
    would queue behind the record writer's transactions, and they behind it.
    """
    with _connection(engine, read_only=True) as connection:
        yield connection


@contextlib.contextmanager
def _connection(engine: sa.Engine, *, read_only: bool) -> cabc.Iterator[sa.Connection]:
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(
            isolation_level="AUTOCOMMIT"
        ) as connection:
            yield connection
    elif read_only:
        with engine.connect() as connection:
            connection.execution_options(**{READ_ONLY_OPTION: True})
            yield connection
    else:
        with engine.begin() as connection:
            yield connection
