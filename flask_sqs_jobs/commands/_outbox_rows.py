"""``flask sqs-jobs outbox list|park|retry|drop``: the outbox's rows, one by one.

Every text of a row (queue, job id, job type, group, last error) came from
the app or from SQS: it is escaped before it reaches the terminal, and JSON
is printed ASCII-only. A row not found (sent meanwhile, dropped, or never
written) is an error (exit 1) naming it, after the rows that were found are
handled; a wrong command line exits 2.
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import click
from flask.cli import with_appcontext

from ._common import ConfigurationError
from ._common import current_parts
from ._common import option
from ._common import printable
from ._common import table

if t.TYPE_CHECKING:
    from ..config import AppParts
    from ..store.sql import SQLAlchemyStore

#: How much of a last error the table shows (``--json`` has all of it).
_ERROR_SHOWN = 80
_IDS = click.argument("row_ids", metavar="ID...", nargs=-1, type=click.IntRange(1))


def outbox_store(parts: AppParts) -> SQLAlchemyStore:
    """The store that holds the outbox, or a configuration error (exit 2)."""
    try:
        return parts.outbox_store()
    except RuntimeError as exc:
        raise ConfigurationError(str(exc)) from None


@click.command("list")
@option("--parked", is_flag=True, help="Only the parked rows.")
@option(
    "--limit",
    type=click.IntRange(1, 10000),
    default=100,
    show_default=True,
    help="Show at most this many rows, oldest first.",
)
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(parked: bool, limit: int, as_json: bool) -> None:
    """List the outbox's rows: id, queue, state, attempts, job, last error.

    A state is ``due``, ``waiting`` (its first seconds, left to the send
    after commit), ``held`` (being sent after commit), ``backing_off``
    (after a failed send) or ``parked`` (no longer sent: retry or drop it).
    """
    from ..store.outbox import list_rows

    with outbox_store(current_parts()).engine.connect() as connection:
        entries = list_rows(connection, parked=parked, limit=limit)
    if as_json:
        rows = [entry.as_dict() for entry in entries]
        click.echo(json.dumps({"rows": rows}, indent=2, ensure_ascii=True))
        return
    if not entries:
        click.echo("no parked rows" if parked else "the outbox is empty")
        return
    now = dt.datetime.now(dt.UTC)
    lines = [["ID", "QUEUE", "STATE", "ATTEMPTS", "AGE (S)", "JOB TYPE", "JOB ID"]]
    errors: list[str] = []
    for entry in entries:
        age = max(0.0, (now - entry.created_at).total_seconds())
        lines.append(
            [
                str(entry.id),
                printable(entry.queue),
                entry.state,
                str(entry.attempts),
                f"{age:.1f}",
                printable(entry.job_type),
                printable(entry.job_id),
            ]
        )
        if entry.last_error:
            errors.append(f"{entry.id}: {_shortened(printable(entry.last_error))}")
    click.echo(table(lines))
    if errors:
        click.echo("last errors:")
        click.echo("\n".join(f"  {line}" for line in errors))


def _shortened(text: str) -> str:
    return text if len(text) <= _ERROR_SHOWN else text[: _ERROR_SHOWN - 3] + "..."


@click.command("park")
@_IDS
@with_appcontext
def park_command(row_ids: tuple[int, ...]) -> None:
    """Park rows by id: the relay no longer sends them until retried."""
    from ..store.outbox import park_rows

    ids = _required(row_ids, "park")
    with outbox_store(current_parts()).engine.begin() as connection:
        found = park_rows(connection, ids)
    _report("parked", found, ids)


@click.command("retry")
@_IDS
@option("--all-parked", is_flag=True, help="Every parked row.")
@with_appcontext
def retry_command(row_ids: tuple[int, ...], all_parked: bool) -> None:
    """Send rows again now, their attempts reset: by id, or every parked row."""
    from ..store.outbox import being_sent
    from ..store.outbox import retry_rows

    if all_parked == bool(row_ids):
        raise click.UsageError("give row ids or --all-parked (one of the two)")
    with outbox_store(current_parts()).engine.begin() as connection:
        if all_parked:
            retried = retry_rows(connection, all_parked=True)
            click.echo(f"retrying {len(retried)} row(s)")
            return
        retried = retry_rows(connection, row_ids)
        busy = being_sent(connection, row_ids)
    if busy:
        click.echo(f"being sent now, left alone: {_ids(busy)}")
    _report("retrying", retried, list(row_ids), busy)


@click.command("drop")
@_IDS
@with_appcontext
def drop_command(row_ids: tuple[int, ...]) -> None:
    """Delete parked rows by id: their jobs are never sent.

    Only a parked row can be dropped: park a row first to drop it.
    """
    from ..store.outbox import drop_rows
    from ..store.outbox import find_rows

    ids = _required(row_ids, "drop")
    with outbox_store(current_parts()).engine.begin() as connection:
        dropped = drop_rows(connection, ids)
        unparked = sorted(find_rows(connection, ids))
    if unparked:
        if dropped:
            click.echo(f"dropped {len(dropped)} row(s): {_ids(dropped)}")
        raise click.ClickException(
            f"not parked, left alone: {_ids(unparked)}; park them first"
            f" (flask sqs-jobs outbox park {' '.join(map(str, unparked))})"
        )
    _report("dropped", dropped, ids)


def _required(row_ids: tuple[int, ...], verb: str) -> list[int]:
    if not row_ids:
        raise click.UsageError(f"give the ids of the rows to {verb} (outbox list)")
    return list(row_ids)


def _report(
    verb: str | None,
    found: list[int],
    asked: list[int],
    left: t.Collection[int] = (),
) -> None:
    """Say what was done; the ids neither found nor ``left`` alone make the
    command fail (exit 1)."""
    if verb is not None and found:
        click.echo(f"{verb} {len(found)} row(s): {_ids(found)}")
    missing = sorted(set(asked) - set(found) - set(left))
    if missing:
        raise click.ClickException(
            f"no outbox row {_ids(missing)}: sent, dropped, or never written"
        )


def _ids(ids: t.Iterable[int]) -> str:
    return ", ".join(map(str, ids))
