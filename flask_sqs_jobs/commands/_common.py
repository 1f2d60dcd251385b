"""What the ``flask sqs-worker`` and ``flask sqs-jobs`` commands share."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import functools
import math
import os
import sys
import typing as t

import click
import structlog
from botocore.exceptions import BotoCoreError
from botocore.exceptions import ClientError
from botocore.exceptions import NoCredentialsError
from flask import current_app
from flask import Flask

from ..config import AppParts
from ..config import AWSSetupError
from ..config import parts_of
from ..engine.model import escape
from ..engine.model import EXIT_SQS_ERROR
from ..engine.model import EXIT_USAGE
from ..engine.model import QueueNotFoundError
from ..engine.ops import dead_letter_queue

if t.TYPE_CHECKING:
    from ..config import AppParts
    from ..engine.sqs import SqsQueue


#: Options of the ``sqs-jobs`` commands take no automatic environment variable:
#: Flask's would be FLASK_SQS_JOBS_<COMMAND>_<OPTION>, which
#: ``app.config.from_prefixed_env()`` would read as an unknown SQS_JOBS_ key.
option = functools.partial(click.option, allow_from_autoenv=False)


class ConfigurationError(click.ClickException):
    """A usage or configuration error: one ``Error: ...`` line, exit status 2."""

    exit_code = EXIT_USAGE


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` that also refuses ``nan`` and ``inf``.

    ``float()`` accepts both, and NaN passes every range comparison, so a plain
    FloatRange lets ``--shutdown-timeout nan`` through.
    """

    name = "finite float range"

    def convert(
        self, value: t.Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> t.Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds.", param, ctx)
        return number


def usable_cores() -> int:
    """The cores this process may run on (``os.process_cpu_count()``; 3.13+)."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return max(1, count or 1)


class ProcessCount(click.IntRange):
    """A count of processes of at least 1, or ``auto`` for one per usable core."""

    name = "processes"

    def __init__(self) -> None:
        super().__init__(min=1)

    def convert(
        self, value: t.Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> t.Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return usable_cores()
        return super().convert(value, param, ctx)


def current_app_and_parts() -> tuple[Flask, AppParts]:
    """The current app and its :class:`AppParts`."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    return app, parts_of(app)


def current_parts() -> AppParts:
    """The current app's :class:`AppParts`."""
    return parts_of()


def check_queue_names(parts: AppParts, names: t.Iterable[str]) -> None:
    configured = parts.config.queues
    for name in names:
        if name not in configured and name not in parts.config.definitions:
            raise ConfigurationError(
                f"unknown queue {name!r}; configured queues (SQS_JOBS_QUEUES):"
                f" {', '.join(repr(n) for n in configured)}"
            )


class SqsError(click.ClickException):
    """SQS refused a call or could not be reached: one ``Error: ...`` line, status 1."""

    exit_code = EXIT_SQS_ERROR


@contextlib.contextmanager
def sqs_errors(parts: AppParts) -> cabc.Iterator[None]:
    """Turn AWS errors into one readable line: set-up problems exit 2, SQS ones 1."""
    try:
        yield
    except AWSSetupError as exc:
        raise ConfigurationError(str(exc)) from None
    except NoCredentialsError:
        raise ConfigurationError(
            "no AWS credentials found: configure them as for any boto3 program"
            " (environment, ~/.aws, an instance or task role)"
        ) from None
    except (BotoCoreError, ClientError) as exc:
        endpoint = parts.config.endpoint_url or "AWS"
        raise SqsError(f"SQS call failed ({endpoint}): {exc}") from None


def queue_named(parts: AppParts, name: str) -> SqsQueue:
    """The configured queue ``name``, its URL resolved; exits 2 if SQS lacks it."""
    check_queue_names(parts, [name])
    queue = parts.queue_group().queue(name)
    try:
        queue.url  # noqa: B018 - resolves the name with GetQueueUrl
    except QueueNotFoundError as exc:
        raise ConfigurationError(f"queue {name!r}: {exc}") from None
    return queue


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def printable(value: object) -> str:
    """``str(value)`` with control characters escaped, safe to print on a terminal.

    C0 and C1 controls, DEL, lone surrogates and the characters that hide or
    reorder text (bidi overrides, zero-width characters, line separators)
    become ``\\n``, ``\\xNN`` or ``\\uNNNN`` as in Python's ``repr`` (the same
    escaping as the worker's log lines), so a crafted dead letter can neither
    start a line of its own, send escape sequences to the terminal, nor read
    otherwise than it is.
    """
    return escape(str(value))


def logs_off_stdout() -> t.ContextManager[object]:
    """Keep stdout for the command's output when structlog prints there.

    An application that never configured structlog gets its default logger,
    which prints to stdout: its ``job_enqueued`` line would then mix with the
    MessageId that scripts read.
    """
    if structlog.is_configured():
        return contextlib.nullcontext()
    return contextlib.redirect_stdout(sys.stderr)


def dead_letter_queue_of(name: str, queue: SqsQueue) -> SqsQueue | None:
    try:
        return dead_letter_queue(queue)
    except QueueNotFoundError as exc:
        raise ConfigurationError(
            f"queue {name!r}: its RedrivePolicy names a dead-letter queue that"
            f" does not exist: {exc}"
        ) from None
