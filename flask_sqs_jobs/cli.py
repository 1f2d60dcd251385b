"""``flask sqs-worker`` and the ``flask sqs-jobs`` operator commands.

Both are added to an app's CLI by :meth:`SQSJobs.init_app`.
"""

from __future__ import annotations

import json
import typing as t

import click
from flask.cli import with_appcontext

from ._producing import Producing
from .commands import batch_command
from .commands import cancel_command
from .commands import check_queue_names
from .commands import ConfigurationError
from .commands import current_app_and_parts
from .commands import current_parts
from .commands import dead_letter_queue_of
from .commands import dlq_command
from .commands import job_command
from .commands import logs_off_stdout
from .commands import option
from .commands import outbox_command
from .commands import queue_named
from .commands import schedules_command
from .commands import sqs_errors
from .commands import store_command
from .commands import table
from .commands import worker_command as worker_command
from .commands import workers_command
from .dashboard import dashboard_command
from .engine.model import QueueNotFoundError
from .engine.ops import counts


@click.group("sqs-jobs")
def jobs_command() -> None:
    """Operate flask-sqs-jobs queues: create them, inspect them, run a local server."""


@jobs_command.command("create-queues")
@option(
    "--max-receive-count",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Receives after which SQS moves a failing job to the dead-letter queue.",
)
@with_appcontext
def create_queues_command(max_receive_count: int) -> None:
    """Create every configured queue with a dead-letter queue and redrive policy.

    Creates only what is missing: an existing queue or dead-letter queue is
    left unchanged, redrive policy included, and reported as such. Meant for
    development and tests; manage production queues with your infrastructure
    tooling.
    """
    from .commands import create_queues
    from .config import create_bucket_lines

    parts = current_parts()
    with sqs_errors(parts):
        lines = create_queues(parts.client(), parts.config, max_receive_count)
        lines += create_bucket_lines(parts.queue_group())
    for line in lines:
        click.echo(line)


@jobs_command.command("local-server")
@option("--port", type=click.IntRange(0, 65535), default=9324, show_default=True)
@option("--host", default="127.0.0.1", show_default=True)
@option(
    "--create-queues/--no-create-queues",
    default=True,
    show_default=True,
    help="Create the configured queues (with dead-letter queues) once it is up.",
)
@with_appcontext
def local_server_command(port: int, host: str, create_queues: bool) -> None:
    """Run a local SQS-compatible server for development (needs the "local" extra).

    It keeps everything in memory: queues and messages are gone when it stops.
    """
    from .commands import run_local_server

    parts = current_parts()
    run_local_server(host, port, parts.config if create_queues else None)


@jobs_command.command("stats")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def stats_command(as_json: bool) -> None:
    """Show visible, in-flight and delayed messages per queue and dead-letter queue.

    The counts are SQS's approximate ones.
    """
    parts = current_parts()
    report = []
    with sqs_errors(parts):
        for name in parts.config.definitions:  # each priority level too
            queue = queue_named(parts, name)
            entry: dict[str, t.Any] = {
                "queue": name,
                "url": queue.url,
                **counts(queue).as_dict(),
            }
            dlq = dead_letter_queue_of(name, queue)
            entry["dead_letter"] = (
                {"url": dlq.url, **counts(dlq).as_dict()} if dlq is not None else None
            )
            report.append(entry)
    if as_json:
        click.echo(json.dumps({"queues": report}, indent=2, ensure_ascii=True))
        return
    rows = [["QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED"]]
    for entry in report:
        rows.append([entry["queue"], *(str(entry[k]) for k in _COUNTS)])
        if entry["dead_letter"]:
            dlq = entry["dead_letter"]
            rows.append(
                [f"  {entry['queue']} (dead letters)", *(str(dlq[k]) for k in _COUNTS)]
            )
    click.echo(table(rows))


_COUNTS = ("visible", "in_flight", "delayed")


jobs_command.add_command(dlq_command)
jobs_command.add_command(store_command)
jobs_command.add_command(schedules_command)
jobs_command.add_command(job_command)
jobs_command.add_command(batch_command)
jobs_command.add_command(cancel_command)
jobs_command.add_command(workers_command)
jobs_command.add_command(dashboard_command)
jobs_command.add_command(outbox_command)


@jobs_command.command("enqueue")
@click.argument("queue")
@click.argument("job_type")
@click.argument("payload_json", default="{}")
@option("--group-id", default=None, help="MessageGroupId (FIFO queues).")
@option("--delay", type=click.IntRange(min=0), default=None, help="Delay in seconds.")
@option("--job-id", default=None, help="The job id (default: a random one).")
@with_appcontext
def enqueue_command(
    queue: str,
    job_type: str,
    payload_json: str,
    group_id: str | None,
    delay: int | None,
    job_id: str | None,
) -> None:
    """Send one job by hand; PAYLOAD_JSON is a JSON object (default {})."""
    app, parts = current_app_and_parts()
    check_queue_names(parts, [queue])
    jobs: Producing = app.extensions["sqs_jobs"]
    try:
        payload = json.loads(payload_json)
    except ValueError as exc:
        raise ConfigurationError(f"PAYLOAD_JSON is not JSON: {exc}") from None
    except RecursionError:
        raise ConfigurationError(
            "PAYLOAD_JSON is nested too deeply to read; flatten the payload"
        ) from None
    if not isinstance(payload, dict):
        raise ConfigurationError(
            "PAYLOAD_JSON must be a JSON object, e.g. '{\"id\": 1}'"
        )
    with sqs_errors(parts), logs_off_stdout():
        try:
            message_id = jobs.enqueue(
                queue,
                job_type,
                payload,
                message_group_id=group_id,
                delay_seconds=delay,
                job_id=job_id,
            )
        except QueueNotFoundError as exc:
            raise ConfigurationError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(str(exc)) from None
        except RecursionError:
            raise ConfigurationError("PAYLOAD_JSON is nested too deeply") from None
    click.echo(message_id)
