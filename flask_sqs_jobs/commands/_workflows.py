"""``flask sqs-jobs batch BATCH_ID [--json]``: a batch's record from the SQL store."""

from __future__ import annotations

import json

import click
from flask import current_app
from flask.cli import with_appcontext

from ._common import option
from ._common import printable


@click.command("batch")
@click.argument("batch_id")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@with_appcontext
def batch_command(batch_id: str, as_json: bool) -> None:
    """Show a batch: status, counts, callbacks sent, failed children."""
    jobs = current_app.extensions["sqs_jobs"]
    try:
        record = jobs.get_batch(batch_id)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    if record is None:
        raise click.ClickException(f"no batch {printable(batch_id)}")
    fields = record.as_dict()
    if as_json:
        # ensure_ascii: no control or escape character reaches the terminal raw.
        click.echo(json.dumps(fields, indent=2, ensure_ascii=True))
        return
    failures = fields.pop("failures")
    fields["callbacks_sent"] = ", ".join(fields["callbacks_sent"]) or None
    for name, value in fields.items():
        click.echo(f"{name}: {printable('-' if value is None else value)}")
    for failure in failures:
        click.echo(
            f"failed: {printable(failure['job_id'])} {printable(failure['job_type'])}"
            f" {printable(failure['error'] or '-')}"
        )
