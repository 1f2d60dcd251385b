"""``flask sqs-jobs schedules [--json]`` and ``flask sqs-jobs schedules sync``."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import datetime as dt
import json
import typing as t

import click
from botocore.exceptions import BotoCoreError
from botocore.exceptions import ClientError
from botocore.exceptions import NoCredentialsError
from flask.cli import with_appcontext

from ._common import ConfigurationError
from ._common import current_parts
from ._common import option
from ._common import SqsError
from ._common import table

#: How many next times the listing shows.
NEXT_TIMES = 3


@click.group("schedules", invoke_without_command=True)
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
@with_appcontext
def schedules_command(ctx: click.Context, as_json: bool) -> None:
    """List the periodic jobs: where each runs, its cron and zone, its next times."""
    if ctx.invoked_subcommand is not None:
        return
    parts = current_parts()
    runs = parts.config.scheduler
    now = dt.datetime.now(dt.UTC)
    report: list[dict[str, t.Any]] = [
        {
            "name": schedule.name,
            "job_type": schedule.job_type,
            "queue": schedule.queue,
            "cron": schedule.cron,
            "timezone": schedule.timezone,
            "runs": runs,
            "catch_up": schedule.catch_up,
            "next": [
                moment.isoformat().replace("+00:00", "Z")
                for moment in schedule.next_times(NEXT_TIMES, now)
            ],
        }
        for schedule in parts.schedules.values()
    ]
    if as_json:
        click.echo(json.dumps({"schedules": report}, indent=2))
        return
    if not report:
        click.echo("no periodic jobs: declare them with @jobs.periodic(...)")
        return
    rows = [["SCHEDULE", "CRON", "TIMEZONE", "RUNS", "NEXT (UTC)"]]
    for entry in report:
        times = ", ".join(moment[:16].replace("T", " ") for moment in entry["next"])
        rows.append(
            [entry["name"], entry["cron"], entry["timezone"], entry["runs"], times]
        )
    click.echo(table(rows))


@schedules_command.command("sync")
@option("--prune", is_flag=True, help="Delete schedules of the group the app lacks.")
@option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@with_appcontext
def sync_command(prune: bool, dry_run: bool) -> None:
    """Create or update one EventBridge Scheduler schedule per periodic job.

    The schedules live in SQS_JOBS_SCHEDULE_GROUP (created when missing) and
    send each job's body straight to its queue as SQS_JOBS_SCHEDULER_ROLE_ARN.
    Idempotent: a second run changes nothing and says so. Set
    SQS_JOBS_SCHEDULER = "eventbridge" so workers do not run them as well.
    """
    from ..periodic import apply
    from ..periodic import plan
    from ..periodic import scheduler_client

    parts = current_parts()
    group = parts.config.schedule_group
    with _aws_errors():
        client = scheduler_client()
        try:
            changes = plan(
                parts.schedules,
                parts.queue_group(),
                client,
                group=group,
                role_arn=parts.config.scheduler_role_arn,
                prune=prune,
            )
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        if not dry_run:
            apply(client, group, changes)
    if dry_run:
        click.echo(f"dry run: nothing is changed in schedule group {group!r}")
    for change in changes:
        click.echo(change.line(dry_run))
    if all(change.action in ("unchanged", "kept") for change in changes):
        click.echo(f"nothing to change: schedule group {group!r} is up to date")
    if parts.config.scheduler != "eventbridge":
        click.echo(
            'note: SQS_JOBS_SCHEDULER is not "eventbridge", so workers run these'
            " periodic jobs too; set it to turn the embedded scheduler off"
        )


@contextlib.contextmanager
def _aws_errors() -> cabc.Iterator[None]:
    try:
        yield
    except NoCredentialsError:
        raise ConfigurationError(
            "no AWS credentials found: configure them as for any boto3 program"
        ) from None
    except (BotoCoreError, ClientError) as exc:
        raise SqsError(f"AWS call failed: {exc}") from None
