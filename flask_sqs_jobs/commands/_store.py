"""``flask sqs-jobs store ...``: set up the job store."""

from __future__ import annotations

import click
from flask.cli import with_appcontext

from ._common import ConfigurationError
from ._common import current_app_and_jobs


@click.group("store")
def store_command() -> None:
    """Set up the job store (SQS_JOBS_STORE_URL or SQSJobs(store=...))."""


@store_command.command("init")
@with_appcontext
def store_init_command() -> None:
    """Create the store's tables (or DynamoDB table) that are missing.

    Idempotent: what exists is left unchanged and reported as such.
    """
    app, jobs = current_app_and_jobs()
    if not jobs.has_store(app):
        raise ConfigurationError(
            "no job store is configured: set SQS_JOBS_STORE_URL (e.g."
            " 'sqlite:///instance/jobs.db') or pass SQSJobs(store=...)"
        )
    store = jobs.store(app)
    click.echo(f"store: {store.describe()}")
    for line in store.create_tables():
        click.echo(line)
