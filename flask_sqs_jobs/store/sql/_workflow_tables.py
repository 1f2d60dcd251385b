"""The workflow tables: batches, their children, chains (``docs/workflows.md``).

``sqs_jobs_batches`` holds a batch's callbacks, ``sqs_jobs_batch_counts``
its counts; each child has a row of ``sqs_jobs_batch_jobs`` whose status
leaves ``pending`` once, by a conditional update: that move is what makes a
child count once.
``sqs_jobs_chains`` holds a chain's steps and which one runs.
"""

from __future__ import annotations

import sqlalchemy as sa

from ._tables import metadata
from ._tables import UTCDateTime

_ID = sa.String(128)

batches = sa.Table(
    "sqs_jobs_batches",
    metadata,
    sa.Column("batch_id", _ID, primary_key=True),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("total", sa.Integer, nullable=False),
    # The count rows with children still pending; the child that takes it to
    # 0 finished the batch.
    sa.Column("shards_left", sa.Integer, nullable=False),
    # Whether a child failed for good yet (on_failure is then due, once).
    sa.Column("failure_seen", sa.Boolean, nullable=False),
    # {"on_success": signature JSON, ...}: the callbacks declared.
    sa.Column("callbacks", sa.JSON, nullable=False),
    # The names of the callbacks sent, in the order they were.
    sa.Column("callbacks_sent", sa.JSON, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
)

#: A batch's counts, spread over a few rows so its children do not all wait
#: on one row's lock: each child counts in the row of its ``shard``.
batch_counts = sa.Table(
    "sqs_jobs_batch_counts",
    metadata,
    sa.Column("batch_id", _ID, primary_key=True),
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("pending", sa.Integer, nullable=False),
    sa.Column("succeeded", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
)

batch_jobs = sa.Table(
    "sqs_jobs_batch_jobs",
    metadata,
    sa.Column("batch_id", _ID, primary_key=True),
    sa.Column("job_id", _ID, primary_key=True),
    sa.Column("job_type", sa.String(256), nullable=False),
    sa.Column("shard", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
)

chains = sa.Table(
    "sqs_jobs_chains",
    metadata,
    sa.Column("chain_id", _ID, primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    # The steps' signatures as JSON, in order.
    sa.Column("steps", sa.JSON, nullable=False),
    sa.Column("pass_result", sa.Boolean, nullable=False),
    sa.Column("current_step", sa.Integer, nullable=False),
    # The job id of the step that runs now (or failed): only it moves the chain.
    sa.Column("current_job_id", _ID, nullable=False),
    # Every step's job id so far, in order.
    sa.Column("job_ids", sa.JSON, nullable=False),
    sa.Column("failed_step", sa.Integer, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
)
