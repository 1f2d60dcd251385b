"""``flask sqs-jobs dlq``: inspect and redrive dead letters."""

from __future__ import annotations

import json
import typing as t

import click
from botocore.exceptions import BotoCoreError
from botocore.exceptions import ClientError
from flask.cli import with_appcontext

from ..engine.model import is_unreadable
from ..engine.model import UNREADABLE
from ..engine.ops import describe_dead_letter
from ..engine.ops import peek
from ..engine.ops import redrive
from ._common import ConfigurationError
from ._common import current_parts
from ._common import dead_letter_queue_of
from ._common import option
from ._common import printable
from ._common import queue_named
from ._common import sqs_errors

if t.TYPE_CHECKING:
    from ..config import AppParts
    from ..engine.sqs import SqsQueue


@click.group("dlq")
def dlq_command() -> None:
    """Inspect and redrive dead letters."""


def _queue_and_dead_letters(parts: AppParts, name: str) -> tuple[SqsQueue, SqsQueue]:
    queue = queue_named(parts, name)
    dlq = dead_letter_queue_of(name, queue)
    if dlq is None:
        raise ConfigurationError(
            f"queue {name!r} has no dead-letter queue (no RedrivePolicy); add one,"
            " e.g. with `flask sqs-jobs create-queues`"
        )
    return queue, dlq


@dlq_command.command("list")
@click.argument("queue")
@option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@with_appcontext
def dlq_list_command(queue: str, limit: int, as_json: bool) -> None:
    """Show the dead letters of QUEUE (a logical name) without consuming them."""
    parts = current_parts()
    with sqs_errors(parts):
        _, dlq = _queue_and_dead_letters(parts, queue)
        _warn_of_own_redrive_policy(dlq)
        messages = peek(dlq, limit)
    letters = [describe_dead_letter(m) for m in messages]
    if as_json:
        report = {"queue": queue, "dead_letters": letters}
        click.echo(json.dumps(report, indent=2, ensure_ascii=True))
        return
    if not letters:
        click.echo(f"no dead letters for {queue!r}")
    for letter in letters:
        for line in _dead_letter_lines(letter):
            click.echo(line)


def _dead_letter_lines(letter: dict[str, t.Any]) -> list[str]:
    """``dlq list``'s lines about one dead letter, every field made printable."""
    reason = letter["dead_letter"] or {}
    if not isinstance(reason, dict):
        reason = {"error": json.dumps(reason)}
    lines = [
        f"{printable(letter['message_id'])}  job_type={printable(letter['job_type'])}"
    ]
    if is_unreadable(reason):
        lines.append(f"  reason: unreadable: {printable(reason[UNREADABLE])}")
    elif reason:
        fields = {
            key: printable(reason.get(key))
            for key in (
                "error_type",
                "error",
                "failed_at",
                "receive_count",
                "source_queue",
            )
        }
        lines.append(
            f"  reason: {fields['error_type']}: {fields['error']}"
            f" (failed {fields['failed_at']}, receive {fields['receive_count']},"
            f" from {fields['source_queue']})"
        )
    else:
        lines.append("  reason: unknown (moved by SQS's redrive policy)")
    if letter.get("offloaded_bytes") is not None:
        lines.append(
            f"  payload: offloaded to S3 ({printable(letter['offloaded_bytes'])} bytes)"
        )
    elif letter["payload"] is not None:
        lines.append(f"  payload: {json.dumps(letter['payload'], ensure_ascii=True)}")
    else:
        lines.append(f"  body (not a job): {printable(repr(letter['body']))}")
    return lines


def _warn_of_own_redrive_policy(dlq: SqsQueue) -> None:
    """Say on stderr that listing may move letters on (the DLQ has its own policy).

    Best effort: a DLQ whose attributes cannot be read is listed without it.
    """
    try:
        dlq.read_attributes()
    except (BotoCoreError, ClientError):
        return
    policy = dlq.redrive_policy()
    if policy is None:
        return
    target, max_receives = policy
    click.echo(
        f"warning: the dead-letter queue {printable(dlq.name)} has a RedrivePolicy of"
        f" its own: listing counts as a receive, and SQS moves a letter received"
        f" {max_receives} times on to {printable(target.rsplit(':', 1)[-1])} at the"
        " next one",
        err=True,
    )


@dlq_command.command("redrive")
@click.argument("queue")
@option("--job-type", default=None, help="Move only dead letters of this type.")
@option("--limit", type=click.IntRange(min=1), default=None, help="Move at most N.")
@option(
    "--any-source",
    is_flag=True,
    help="Also move dead letters that record another source queue.",
)
@with_appcontext
def dlq_redrive_command(
    queue: str, job_type: str | None, limit: int | None, any_source: bool
) -> None:
    """Move dead letters of QUEUE (a logical name) back to it, to run again.

    A dead letter that records another source queue (a dead-letter queue
    shared by several queues) stays, unless --any-source.
    """
    parts = current_parts()
    with sqs_errors(parts):
        target, dlq = _queue_and_dead_letters(parts, queue)
        result = redrive(
            dlq,
            target,
            job_type=job_type,
            limit=limit,
            queue_name=None if any_source else queue,
        )
    click.echo(
        f"moved {result.moved} dead letter(s) back to {queue!r}; {result.left} left"
    )
    if result.other_sources:
        sources = ", ".join(
            f"{printable(name)} ({count})"
            for name, count in sorted(result.other_sources.items())
        )
        click.echo(
            f"left {sum(result.other_sources.values())} dead letter(s) that record"
            f" another source queue: {sources}; redrive them to their own queue"
            " (flask sqs-jobs dlq redrive THAT_QUEUE), or pass --any-source to send"
            f" them to {queue!r}"
        )
