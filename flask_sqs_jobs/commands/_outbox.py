"""``flask sqs-jobs outbox ...``: run the outbox relay, show what is pending.

The commands on single rows (``list``, ``park``, ``retry``, ``drop``) are in
:mod:`._outbox_rows`.
"""

from __future__ import annotations

import contextlib
import json
import signal
import types
import typing as t

import click
from flask.cli import with_appcontext

from ._common import current_parts
from ._common import logs_off_stdout
from ._common import option
from ._common import printable
from ._common import table
from ._outbox_rows import drop_command
from ._outbox_rows import list_command
from ._outbox_rows import outbox_store
from ._outbox_rows import park_command
from ._outbox_rows import retry_command

if t.TYPE_CHECKING:
    from ..config import AppParts
    from ..store.outbox import OutboxRelay


@click.group("outbox")
def outbox_command() -> None:
    """The transactional outbox: jobs written with enqueue(..., session=)."""


@outbox_command.command("relay")
@option("--once", is_flag=True, help="Send what is pending, then exit.")
@with_appcontext
def relay_command(once: bool) -> None:
    """Send the outbox's rows to SQS until SIGTERM or SIGINT.

    Every ``flask sqs-worker`` runs a relay already; run this one where no
    worker does. With ``--once`` it sends until the outbox is empty (rows
    backing off after a failed send stay) and exits 0.
    """
    relay = make_relay(current_parts())
    if once:
        with logs_off_stdout():
            sent = relay.drain()
        click.echo(f"sent {sent} job(s)")
        return
    with _stop_on_signals(relay):
        relay.run()


@outbox_command.command("status")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def status_command(as_json: bool) -> None:
    """Show the jobs waiting in the outbox, and the oldest one's age, per queue."""
    from ..store.outbox import outbox_status

    with outbox_store(current_parts()).engine.connect() as connection:
        queues = outbox_status(connection)
    report = {
        "pending": sum(q.pending for q in queues),
        "oldest_age_seconds": round(
            max((q.oldest_age_seconds for q in queues), default=0.0), 3
        ),
        "failing": sum(q.failing for q in queues),
        "parked": sum(q.parked for q in queues),
        "queues": {
            q.queue: {
                "pending": q.pending,
                "oldest_age_seconds": round(q.oldest_age_seconds, 3),
                "failing": q.failing,
                "parked": q.parked,
            }
            for q in queues
        },
    }
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=True))
        return
    click.echo(
        f"pending: {report['pending']}, oldest: {report['oldest_age_seconds']:.1f} s,"
        f" failing: {report['failing']}, parked: {report['parked']}"
    )
    if queues:
        rows = [["QUEUE", "PENDING", "OLDEST (S)", "FAILING", "PARKED"]]
        rows += [
            [
                printable(q.queue),
                str(q.pending),
                f"{q.oldest_age_seconds:.1f}",
                str(q.failing),
                str(q.parked),
            ]
            for q in queues
        ]
        click.echo(table(rows))


for _command in (list_command, park_command, retry_command, drop_command):
    outbox_command.add_command(_command)


def make_relay(parts: AppParts) -> OutboxRelay:
    from ..store.outbox import OutboxRelay
    from ..store.outbox import RelayLease

    store = outbox_store(parts)
    return OutboxRelay(
        store.engine,
        parts.queue_group(),
        max_attempts=parts.config.outbox_max_attempts,
        lease=RelayLease(store.limits(), parts.config.outbox_relays),
    )


@contextlib.contextmanager
def _stop_on_signals(relay: OutboxRelay) -> t.Iterator[None]:
    def stop(signum: int, frame: types.FrameType | None) -> None:
        relay.request_stop()

    previous = {
        sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
