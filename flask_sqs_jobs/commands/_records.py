"""``flask sqs-jobs job JOB_ID``, ``cancel JOB_ID`` and ``workers``: the store."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import click
from flask.cli import with_appcontext

from ..engine.model import shown as shown_json
from ..store.model import WorkerRecord
from ..store.records import cancel
from ..store.records import get_job
from ..store.records import STALE_AFTER_SECONDS
from ._common import ConfigurationError
from ._common import current_parts
from ._common import option
from ._common import printable
from ._common import table

if t.TYPE_CHECKING:
    from ..store.model import JobStore


def _store() -> JobStore:
    parts = current_parts()
    if parts.store is None:
        raise ConfigurationError(
            "job records and workers live in the job store: set SQS_JOBS_STORE_URL"
            " (e.g. 'sqlite:///instance/jobs.db') or pass SQSJobs(store=...)"
        )
    return parts.require_store()


def _dumps(value: object) -> str:
    # ensure_ascii: no control or escape character reaches the terminal raw.
    return json.dumps(value, indent=2, ensure_ascii=True)


@click.command("job")
@click.argument("job_id")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@with_appcontext
def job_command(job_id: str, as_json: bool) -> None:
    """Show the record of one job: status, attempts, times, result, error."""
    store = _store()
    record = get_job(store, current_parts().hooks, job_id)
    if record is None:
        raise click.ClickException(
            f"no record of job {printable(job_id)}: never recorded, or pruned"
            " after SQS_JOBS_RECORD_RETENTION_SECONDS"
        )
    fields = record.as_dict()
    fields["result"] = shown_json(fields.get("result"), "the result")
    if as_json:
        click.echo(_dumps(fields))
        return
    for name, value in fields.items():
        shown = "-" if value is None else value
        if name == "result" and value is not None:
            shown = json.dumps(value, ensure_ascii=True)
        click.echo(f"{name}: {printable(shown)}")


@click.command("cancel")
@click.argument("job_id")
@with_appcontext
def cancel_command(job_id: str) -> None:
    """Cancel a job: deleted unrun when it arrives, or asked to stop if running.

    Exits 0 when the job was cancelled, 1 when it is unknown or finished.
    """
    if not cancel(_store(), current_parts().hooks, job_id):
        raise click.ClickException(
            f"job {printable(job_id)} not cancelled: no record of it, or it has"
            " finished already"
        )
    click.echo(f"job {printable(job_id)} cancelled")


@click.command("workers")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def workers_command(as_json: bool) -> None:
    """List the workers registered in the store; those silent for a minute are lost."""
    workers = _store().worker_registry().list()
    now = dt.datetime.now(dt.UTC)
    if as_json:
        entries = [{**w.as_dict(), "state": _state(w, now)} for w in workers]
        click.echo(_dumps({"workers": entries}))
        return
    if not workers:
        click.echo("no workers registered")
        return
    rows = [["WORKER", "STATE", "QUEUES", "BUSY", "STARTED", "LAST SEEN", "VERSION"]]
    for w in workers:
        rows.append(
            [
                printable(w.worker_id),
                _state(w, now),
                printable(",".join(w.queues)),
                f"{w.busy_slots}/{w.concurrency}",
                w.started_at.isoformat(timespec="seconds"),
                f"{(now - w.last_seen_at).total_seconds():.0f}s ago",
                printable(w.version),
            ]
        )
    click.echo(table(rows))


def _state(worker: WorkerRecord, now: dt.datetime) -> str:
    return "lost" if worker.is_lost(now, STALE_AFTER_SECONDS) else "live"
