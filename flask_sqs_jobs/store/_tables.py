"""The tables of :class:`SQLAlchemyStore`, on their own ``MetaData``.

Every table is prefixed ``sqs_jobs_``. Alembic users add
``SQLAlchemyStore.metadata`` to their ``target_metadata`` list;
``docs/guarantees.md`` describes each table.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa


class UTCDateTime(sa.TypeDecorator[dt.datetime]):
    """An aware UTC datetime on every database (SQLite keeps no time zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: dt.datetime | None, dialect: sa.Dialect
    ) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a naive datetime cannot be stored: {value!r}")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: t.Any, dialect: sa.Dialect
    ) -> dt.datetime | None:
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
    sa.Column("job_type", sa.String(255), nullable=False),
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
    sa.Index("sqs_jobs_outbox_available_at", "available_at", "id"),
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
    #: Who holds the in-progress lease; only its holder completes or releases it.
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
