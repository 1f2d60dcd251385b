"""``flask sqs-jobs store ...``: set up the job store."""

from __future__ import annotations

import click
from flask.cli import with_appcontext

from ._common import ConfigurationError
from ._common import current_parts


@click.group("store")
def store_command() -> None:
    """Set up the job store (SQS_JOBS_STORE_URL or SQSJobs(store=...))."""


@store_command.command("init")
@with_appcontext
def store_init_command() -> None:
    """Create the store's tables (or DynamoDB table) that are missing.

    Idempotent: what exists is left unchanged and reported as such.
    """
    parts = current_parts()
    if parts.store is None:
        raise ConfigurationError(
            "no job store is configured: set SQS_JOBS_STORE_URL (e.g."
            " 'sqlite:///instance/jobs.db') or pass SQSJobs(store=...)"
        )
    store = parts.require_store()
    click.echo(f"store: {store.describe()}")
    for line in store.create_tables():
        click.echo(line)
