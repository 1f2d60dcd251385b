"""``flask sqs-worker`` and the ``flask sqs-jobs`` operator commands.

Both are added to an app's CLI by :meth:`SQSJobs.init_app`.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import functools
import json
import re
import sys
import typing as t

import click
import structlog
from botocore.exceptions import BotoCoreError
from botocore.exceptions import ClientError
from botocore.exceptions import NoCredentialsError
from flask import current_app
from flask import Flask
from flask.cli import with_appcontext

from ._config import AWSSetupError
from .engine._exceptions import QueueNotFoundError
from .engine._health import HealthServer
from .engine._inspection import counts
from .engine._inspection import dead_letter_queue
from .engine._inspection import describe_dead_letter
from .engine._inspection import peek
from .engine._inspection import redrive
from .engine._runner import run_until_signalled

if t.TYPE_CHECKING:
    from ._extension import SQSJobs
    from .engine._metrics import PrometheusMetrics
    from .engine._queue import SqsQueue

log = structlog.get_logger(__name__)

#: The worker stopped gracefully (a signal, or ``should_stop``).
EXIT_OK = 0
#: Every queue failed to receive 10 times in a row; let the supervisor restart.
EXIT_RECEIVE_FAILURES = 1
#: A usage or configuration error: fix the command line or the config.
EXIT_USAGE = 2


#: Options of the ``sqs-jobs`` commands take no automatic environment variable:
#: Flask's would be FLASK_SQS_JOBS_<COMMAND>_<OPTION>, which
#: ``app.config.from_prefixed_env()`` would read as an unknown SQS_JOBS_ key.
option = functools.partial(click.option, allow_from_autoenv=False)


class ConfigurationError(click.ClickException):
    """A usage or configuration error: one ``Error: ...`` line, exit status 2."""

    exit_code = EXIT_USAGE


def current_app_and_jobs() -> tuple[Flask, SQSJobs]:
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    return app, app.extensions["sqs_jobs"]


def check_queue_names(jobs: SQSJobs, app: Flask, names: t.Iterable[str]) -> None:
    configured = jobs.config(app).queues
    for name in names:
        if name not in configured:
            raise ConfigurationError(
                f"unknown queue {name!r}; configured queues (SQS_JOBS_QUEUES):"
                f" {', '.join(repr(n) for n in configured)}"
            )


@click.command("sqs-worker")
@click.option(
    "--queue",
    "queue_names",
    multiple=True,
    metavar="NAME",
    envvar="FLASK_SQS_WORKER_QUEUE",
    help="Logical queue to poll; repeat for several. Default: every configured queue.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    envvar="FLASK_SQS_WORKER_CONCURRENCY",
    help="Jobs run at once, each in its own thread.",
)
@click.option(
    "--idle-wait",
    type=click.IntRange(0, 20),
    default=None,
    metavar="SECONDS",
    envvar="FLASK_SQS_WORKER_IDLE_WAIT",
    help="Long-poll wait when every queue is empty."
    " Default: SQS_JOBS_IDLE_WAIT_SECONDS.",
)
@click.option(
    "--health-port",
    type=click.IntRange(0, 65535),
    default=None,
    envvar="FLASK_SQS_WORKER_HEALTH_PORT",
    help="Serve GET /healthz and GET /metrics on this port. Default: off.",
)
@click.option(
    "--health-host",
    default="127.0.0.1",
    show_default=True,
    envvar="FLASK_SQS_WORKER_HEALTH_HOST",
    help="Address of the health server; 0.0.0.0 for probes from outside the pod.",
)
@click.option(
    "--health-max-age",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    envvar="FLASK_SQS_WORKER_HEALTH_MAX_AGE",
    help="/healthz answers 503 when no receive completed for this long and no"
    " job runs.",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    envvar="FLASK_SQS_WORKER_SHUTDOWN_TIMEOUT",
    help="After SIGTERM, how long running jobs may take before their messages are"
    " released for another worker. Default: wait for them.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    envvar="FLASK_SQS_WORKER_PROCESSES",
    help="Worker processes, each with --concurrency threads, under one supervisor.",
)
@with_appcontext
def worker_command(
    queue_names: tuple[str, ...],
    concurrency: int,
    idle_wait: int | None,
    health_port: int | None,
    health_host: str,
    health_max_age: float,
    shutdown_timeout: float | None,
    processes: int,
) -> None:
    """Run a worker for this app's job handlers.

    SIGTERM or SIGINT stops it gracefully: nothing more is received, running
    jobs finish, and it exits 0. A second signal exits at once, releasing
    every message it holds. Exit status 1 means every queue failed to receive
    10 times in a row; 2 means a usage or configuration error.

    With ``--processes N`` above 1 a supervisor runs N such workers, each in
    its own process, forwards the signals to them and restarts any that dies.
    """
    app, jobs = current_app_and_jobs()
    if not jobs.handlers:
        raise ConfigurationError(
            "no job handlers are registered: decorate functions with"
            " @jobs.handler('job_type') in a module the app imports"
        )
    if jobs.config(app).eager:
        raise ConfigurationError(
            "SQS_JOBS_EAGER is on, so jobs run inline at enqueue and nothing reaches"
            " SQS; turn it off for the worker"
        )
    check_queue_names(jobs, app, queue_names)
    options = WorkerOptions(
        queue_names=queue_names,
        concurrency=concurrency,
        idle_wait=idle_wait,
        shutdown_timeout=shutdown_timeout,
        health_max_age=health_max_age,
    )
    if processes == 1:
        raise SystemExit(run_one_worker(app, jobs, options, health_host, health_port))
    from ._supervisor import Supervisor

    supervisor = Supervisor(
        processes,
        functools.partial(run_one_worker, app, jobs, options),
        health_host=health_host,
        health_port=health_port,
        forget_clients=functools.partial(jobs._forget_clients, app),
    )
    raise SystemExit(supervisor.run())


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    """The ``flask sqs-worker`` options that every worker process runs with."""

    queue_names: tuple[str, ...]
    concurrency: int
    idle_wait: int | None
    shutdown_timeout: float | None
    health_max_age: float


def run_one_worker(
    app: Flask,
    jobs: SQSJobs,
    options: WorkerOptions,
    health_host: str,
    health_port: int | None,
    on_health_started: cabc.Callable[[int], None] | None = None,
) -> int:
    """Run one worker in this process until it stops; return its exit status.

    This is all of ``flask sqs-worker --processes 1``, and what each worker
    process of a supervisor runs (there with a health server on an ephemeral
    port, reported to ``on_health_started``).

    :raises ConfigurationError: the queues or the AWS set-up are wrong.
    """
    queue_names = options.queue_names
    metrics = _metrics() if health_port is not None else None
    with sqs_errors(jobs, app):
        worker = jobs.create_worker(
            app,
            queues=queue_names or None,
            concurrency=options.concurrency,
            idle_wait_seconds=options.idle_wait,
            shutdown_timeout=options.shutdown_timeout,
            hooks=[metrics] if metrics is not None else (),
        )
        _check_queues_exist(jobs, app, queue_names or jobs.config(app).queues)
    health = None
    if health_port is not None:
        if metrics is not None:
            metrics.bind(worker)
        health = HealthServer(
            worker,
            host=health_host,
            port=health_port,
            max_age=options.health_max_age,
            metrics=metrics,
        )
        health.start()
        if on_health_started is not None:
            on_health_started(health.port)
    try:
        return run_until_signalled(worker)
    finally:
        if health is not None:
            health.stop()


def _metrics() -> PrometheusMetrics | None:
    try:
        from .engine._metrics import PrometheusMetrics
    except ImportError as exc:
        log.warning("metrics_unavailable", reason=str(exc))
        return None
    return PrometheusMetrics()


def _check_queues_exist(jobs: SQSJobs, app: Flask, names: t.Iterable[str]) -> None:
    """Fail fast on a queue name SQS does not know; leave other errors to the worker.

    An unreachable endpoint is retried by the worker with backoff (and
    reported), so a worker started before its network is ready still comes up.
    """
    group = jobs.queues(app)
    for name in names:
        try:
            group.queue(name).url  # noqa: B018 - resolves the name with GetQueueUrl
        except QueueNotFoundError as exc:
            raise ConfigurationError(f"queue {name!r}: {exc}") from None
        except NoCredentialsError:
            raise
        except Exception as exc:
            log.warning("queue_lookup_failed", queue=name, error=str(exc))


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
    from ._admin import create_queues

    app, jobs = current_app_and_jobs()
    with sqs_errors(jobs, app):
        lines = create_queues(jobs.client(app), jobs.config(app), max_receive_count)
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
    from ._admin import run_local_server

    app, jobs = current_app_and_jobs()
    run_local_server(host, port, jobs.config(app) if create_queues else None)


class SqsError(click.ClickException):
    """SQS refused a call or could not be reached: one ``Error: ...`` line, status 1."""

    exit_code = 1


@contextlib.contextmanager
def sqs_errors(jobs: SQSJobs, app: Flask) -> cabc.Iterator[None]:
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
        endpoint = jobs.config(app).endpoint_url or "AWS"
        raise SqsError(f"SQS call failed ({endpoint}): {exc}") from None


def _queue(jobs: SQSJobs, app: Flask, name: str) -> SqsQueue:
    """The configured queue ``name``, its URL resolved; exits 2 if SQS lacks it."""
    check_queue_names(jobs, app, [name])
    queue = jobs.queues(app).queue(name)
    try:
        queue.url  # noqa: B018 - resolves the name with GetQueueUrl
    except QueueNotFoundError as exc:
        raise ConfigurationError(f"queue {name!r}: {exc}") from None
    return queue


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


@jobs_command.command("stats")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def stats_command(as_json: bool) -> None:
    """Show visible, in-flight and delayed messages per queue and dead-letter queue.

    The counts are SQS's approximate ones.
    """
    app, jobs = current_app_and_jobs()
    report = []
    with sqs_errors(jobs, app):
        for name in jobs.config(app).queues:
            queue = _queue(jobs, app, name)
            entry: dict[str, t.Any] = {
                "queue": name,
                "url": queue.url,
                **counts(queue).as_dict(),
            }
            dlq = _dead_letter_queue_of(name, queue)
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
    click.echo(_table(rows))


_COUNTS = ("visible", "in_flight", "delayed")


@jobs_command.group("dlq")
def dlq_command() -> None:
    """Inspect and redrive dead letters."""


def _dead_letter_queue_of(name: str, queue: SqsQueue) -> SqsQueue | None:
    try:
        return dead_letter_queue(queue)
    except QueueNotFoundError as exc:
        raise ConfigurationError(
            f"queue {name!r}: its RedrivePolicy names a dead-letter queue that"
            f" does not exist: {exc}"
        ) from None


def _queue_and_dead_letters(
    jobs: SQSJobs, app: Flask, name: str
) -> tuple[SqsQueue, SqsQueue]:
    queue = _queue(jobs, app, name)
    dlq = _dead_letter_queue_of(name, queue)
    if dlq is None:
        raise ConfigurationError(
            f"queue {name!r} has no dead-letter queue (no RedrivePolicy); add one,"
            " e.g. with `flask sqs-jobs create-queues`"
        )
    return queue, dlq


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(value: object) -> str:
    """``str(value)`` with control characters escaped, safe to print on a terminal.

    C0 and C1 controls, DEL and lone surrogates become ``\\n``, ``\\xNN`` or
    ``\\uNNNN`` as in Python's ``repr``, so a crafted dead letter can neither
    start a line of its own nor send escape sequences to the terminal.
    """
    return _UNPRINTABLE.sub(_escape, str(value))


_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


@dlq_command.command("list")
@click.argument("queue")
@option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@with_appcontext
def dlq_list_command(queue: str, limit: int, as_json: bool) -> None:
    """Show the dead letters of QUEUE (a logical name) without consuming them."""
    app, jobs = current_app_and_jobs()
    with sqs_errors(jobs, app):
        _, dlq = _queue_and_dead_letters(jobs, app, queue)
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
    if reason:
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
    if letter["payload"] is not None:
        lines.append(f"  payload: {json.dumps(letter['payload'], ensure_ascii=True)}")
    else:
        lines.append(f"  body (not a job): {printable(repr(letter['body']))}")
    return lines


@dlq_command.command("redrive")
@click.argument("queue")
@option("--job-type", default=None, help="Move only dead letters of this type.")
@option("--limit", type=click.IntRange(min=1), default=None, help="Move at most N.")
@with_appcontext
def dlq_redrive_command(queue: str, job_type: str | None, limit: int | None) -> None:
    """Move dead letters of QUEUE (a logical name) back to it, to run again."""
    app, jobs = current_app_and_jobs()
    with sqs_errors(jobs, app):
        target, dlq = _queue_and_dead_letters(jobs, app, queue)
        result = redrive(dlq, target, job_type=job_type, limit=limit)
    click.echo(
        f"moved {result.moved} dead letter(s) back to {queue!r}; {result.left} left"
    )


def _logs_off_stdout() -> t.ContextManager[object]:
    """Keep stdout for the command's output when structlog prints there.

    An application that never configured structlog gets its default logger,
    which prints to stdout: its ``job_enqueued`` line would then mix with the
    MessageId that scripts read.
    """
    if structlog.is_configured():
        return contextlib.nullcontext()
    return contextlib.redirect_stdout(sys.stderr)


@jobs_command.command("enqueue")
@click.argument("queue")
@click.argument("job_type")
@click.argument("payload_json", default="{}")
@option("--group-id", default=None, help="MessageGroupId (FIFO queues).")
@option("--delay", type=click.IntRange(min=0), default=None, help="Delay in seconds.")
@with_appcontext
def enqueue_command(
    queue: str,
    job_type: str,
    payload_json: str,
    group_id: str | None,
    delay: int | None,
) -> None:
    """Send one job by hand; PAYLOAD_JSON is a JSON object (default {})."""
    app, jobs = current_app_and_jobs()
    check_queue_names(jobs, app, [queue])
    try:
        payload = json.loads(payload_json)
    except ValueError as exc:
        raise ConfigurationError(f"PAYLOAD_JSON is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ConfigurationError(
            "PAYLOAD_JSON must be a JSON object, e.g. '{\"id\": 1}'"
        )
    with sqs_errors(jobs, app), _logs_off_stdout():
        try:
            message_id = jobs.enqueue(
                queue, job_type, payload, message_group_id=group_id, delay_seconds=delay
            )
        except QueueNotFoundError as exc:
            raise ConfigurationError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(str(exc)) from None
    click.echo(message_id)
