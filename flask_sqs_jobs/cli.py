"""``flask sqs-worker`` and the ``flask sqs-jobs`` operator commands.

Both are added to an app's CLI by :meth:`SQSJobs.init_app`.
"""

from __future__ import annotations

import typing as t

import click
import structlog
from flask import current_app
from flask import Flask
from flask.cli import with_appcontext

from .engine.exceptions import QueueNotFoundError
from .engine.runner import run_until_signalled
from .health import HealthServer

if t.TYPE_CHECKING:
    from ._extension import SQSJobs
    from .contrib.prometheus import PrometheusMetrics

log = structlog.get_logger(__name__)

#: The worker stopped gracefully (a signal, or ``should_stop``).
EXIT_OK = 0
#: Every queue failed to receive 10 times in a row; let the supervisor restart.
EXIT_RECEIVE_FAILURES = 1
#: A usage or configuration error: fix the command line or the config.
EXIT_USAGE = 2


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
@with_appcontext
def worker_command(
    queue_names: tuple[str, ...],
    concurrency: int,
    idle_wait: int | None,
    health_port: int | None,
    health_host: str,
    health_max_age: float,
    shutdown_timeout: float | None,
) -> None:
    """Run a worker for this app's job handlers.

    SIGTERM or SIGINT stops it gracefully: nothing more is received, running
    jobs finish, and it exits 0. A second signal exits at once, releasing
    every message it holds. Exit status 1 means every queue failed to receive
    10 times in a row; 2 means a usage or configuration error.
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
    metrics = _metrics() if health_port is not None else None
    worker = jobs.create_worker(
        app,
        queues=queue_names or None,
        concurrency=concurrency,
        idle_wait_seconds=idle_wait,
        shutdown_timeout=shutdown_timeout,
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
            max_age=health_max_age,
            metrics=metrics,
        )
        health.start()
    try:
        status = run_until_signalled(worker)
    finally:
        if health is not None:
            health.stop()
    raise SystemExit(status)


def _metrics() -> PrometheusMetrics | None:
    try:
        from .contrib.prometheus import PrometheusMetrics
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
        except Exception as exc:
            log.warning("queue_lookup_failed", queue=name, error=str(exc))


@click.group("sqs-jobs")
def jobs_command() -> None:
    """Operate flask-sqs-jobs queues: create them, inspect them, run a local server."""


@jobs_command.command("create-queues")
@click.option(
    "--max-receive-count",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Receives after which SQS moves a failing job to the dead-letter queue.",
)
@with_appcontext
def create_queues_command(max_receive_count: int) -> None:
    """Create every configured queue with a dead-letter queue and redrive policy.

    Safe to run again: existing queues are kept and their redrive policy is
    brought up to date. Meant for development and tests; manage production
    queues with your infrastructure tooling.
    """
    from ._admin import create_queues

    app, jobs = current_app_and_jobs()
    for line in create_queues(jobs.client(app), jobs.config(app), max_receive_count):
        click.echo(line)


@jobs_command.command("local-server")
@click.option("--port", type=click.IntRange(0, 65535), default=9324, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
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
