"""``flask sqs-worker``: run the worker (or a supervisor of several)."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import functools
import typing as t

import click
import structlog
from botocore.exceptions import NoCredentialsError
from flask import Flask
from flask.cli import with_appcontext

from ..config import missing_store_error
from ..engine.model import EXIT_OK
from ..engine.model import EXIT_RECYCLED
from ..engine.model import QueueNotFoundError
from ..engine.model import running
from ..engine.ops import HealthServer
from ..engine.worker import run_until_signalled
from ..store.outbox import bind_outbox_metrics
from ._common import check_queue_names
from ._common import ConfigurationError
from ._common import current_app_and_parts
from ._common import FiniteFloatRange
from ._common import ProcessCount
from ._common import sqs_errors
from ._recycling import RecycleLimits
from ._recycling import Recycler
from ._recycling import recycling_options
from ._services import worker_services

if t.TYPE_CHECKING:
    from ..config import AppParts
    from ..engine.ops import PrometheusMetrics


log = structlog.get_logger(__name__)


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
    type=FiniteFloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    envvar="FLASK_SQS_WORKER_HEALTH_MAX_AGE",
    help="/healthz answers 503 when no receive completed for this long and no"
    " job runs.",
)
@click.option(
    "--shutdown-timeout",
    type=FiniteFloatRange(min=0),
    default=None,
    metavar="SECONDS",
    envvar="FLASK_SQS_WORKER_SHUTDOWN_TIMEOUT",
    help="After SIGTERM, how long running jobs may take before their messages are"
    " released for another worker. Default: wait for them.",
)
@click.option(
    "--processes",
    type=ProcessCount(),
    default=1,
    show_default=True,
    envvar="FLASK_SQS_WORKER_PROCESSES",
    help="Worker processes, each with --concurrency threads, under one supervisor;"
    " 'auto' for one per usable core.",
)
@click.option(
    "--reload",
    is_flag=True,
    envvar="FLASK_SQS_WORKER_RELOAD",
    help="Restart the worker gracefully when a Python file of the app changes"
    " (for development; one worker process).",
)
@click.option(
    "--no-outbox-relay",
    "no_outbox_relay",
    is_flag=True,
    envvar="FLASK_SQS_WORKER_NO_OUTBOX_RELAY",
    help="Do not relay the transactional outbox's jobs (relayed by default when"
    " the app has a SQLAlchemy job store).",
)
@recycling_options
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
    reload: bool = False,
    no_outbox_relay: bool = False,
    max_jobs: int | None = None,
    max_memory_mb: int | None = None,
    max_age: float | None = None,
) -> None:
    """Run a worker for this app's job handlers.

    SIGTERM or SIGINT stops it gracefully: nothing more is received, running
    jobs finish, and it exits 0 (so it does after ``--max-jobs``,
    ``--max-memory-mb`` or ``--max-age``). A second signal exits at once, releasing
    every message it holds. Exit status 1 means every queue failed to receive
    10 times in a row; 2 means a usage or configuration error.

    With ``--processes N`` above 1 a supervisor runs N such workers, each in
    its own process, forwards the signals to them and restarts any that dies.
    With ``--reload`` it runs one, started afresh when the app's code changes.
    """
    if reload and processes > 1:
        raise ConfigurationError(
            f"--reload runs one worker process, for development; it cannot be used"
            f" with --processes {processes}"
        )
    app, parts = current_app_and_parts()
    if not parts.handlers:
        raise ConfigurationError(
            "no job handlers are registered: decorate functions with"
            " @jobs.handler('job_type') in a module the app imports"
        )
    if parts.config.eager:
        raise ConfigurationError(
            "SQS_JOBS_EAGER is on, so jobs run inline at enqueue and nothing reaches"
            " SQS; turn it off for the worker"
        )
    check_queue_names(parts, queue_names)
    if parts.schedules:
        from ..periodic import check_scheduling
        from ..periodic import SchedulingError

        try:
            check_scheduling(
                parts.schedules,
                embedded=parts.config.scheduler == "embedded",
                definitions=parts.config.definitions,
                store=parts.store,
                handlers=parts.handlers,
            )
        except SchedulingError as exc:
            raise ConfigurationError(str(exc)) from None
    if parts.store is None and (error := missing_store_error(parts.handlers)):
        raise ConfigurationError(error)
    options = WorkerOptions(
        queue_names=queue_names,
        concurrency=concurrency,
        idle_wait=idle_wait,
        shutdown_timeout=shutdown_timeout,
        health_max_age=health_max_age,
        outbox_relay=not no_outbox_relay,
        recycle=RecycleLimits(max_jobs, max_memory_mb, max_age),
        recycled_status=EXIT_OK if processes == 1 else EXIT_RECYCLED,
    )
    from ._reloading import reloaded_channel
    from ._reloading import serve_reloaded

    run_worker = functools.partial(run_one_worker, app, parts, options)
    channel = reloaded_channel()
    if channel is not None:  # a worker process that --reload started
        raise SystemExit(serve_reloaded(channel, run_worker, health_host))
    if reload:
        from ._reloading import ReloadingSupervisor
        from ._reloading import restart_command
        from ._reloading import watcher_for

        reloading = ReloadingSupervisor(
            watcher_for(app),
            restart_command(),
            health_host=health_host,
            health_port=health_port,
        )
        raise SystemExit(reloading.run())
    if processes == 1:
        raise SystemExit(run_one_worker(app, parts, options, health_host, health_port))
    from ._supervisor import Supervisor

    supervisor = Supervisor(
        processes,
        run_worker,
        health_host=health_host,
        health_port=health_port,
        forget_clients=parts.forget_clients,
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
    #: Run the transactional outbox's relay beside the worker.
    outbox_relay: bool = True
    #: When the process retires itself, and the status it then exits with.
    recycle: RecycleLimits = dataclasses.field(default_factory=RecycleLimits)
    recycled_status: int = EXIT_OK


def run_one_worker(
    app: Flask,
    parts: AppParts,
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
    recycler = Recycler(options.recycle) if options.recycle else None
    hooks = [h for h in (metrics, recycler) if h is not None]
    with sqs_errors(parts):
        worker = parts.create_worker(
            queues=queue_names or None,
            concurrency=options.concurrency,
            idle_wait_seconds=options.idle_wait,
            should_stop=recycler,
            shutdown_timeout=options.shutdown_timeout,
            hooks=hooks,
        )
        _check_queues_exist(parts, queue_names or parts.config.queues)
    health = None
    if health_port is not None:
        if metrics is not None:
            metrics.bind(worker)
            bind_outbox_metrics(metrics, parts.store)
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
        with running(worker_services(app, parts, worker, options)):
            status = run_until_signalled(worker)
    finally:
        if health is not None:
            health.stop()
    if status == EXIT_OK and recycler is not None and recycler.reason is not None:
        return options.recycled_status
    return status


def _metrics() -> PrometheusMetrics | None:
    try:
        from ..engine.ops import PrometheusMetrics
    except ImportError as exc:
        log.warning("metrics_unavailable", reason=str(exc))
        return None
    return PrometheusMetrics()


def _check_queues_exist(parts: AppParts, names: t.Iterable[str]) -> None:
    """Fail fast on a queue name SQS does not know; leave other errors to the worker.

    An unreachable endpoint is retried by the worker with backoff (and
    reported), so a worker started before its network is ready still comes up.
    """
    group = parts.queue_group()
    for name in [level for n in names for level in group.levels_of(n)]:
        try:
            group.queue(name).url  # noqa: B018 - resolves the name with GetQueueUrl
        except QueueNotFoundError as exc:
            raise ConfigurationError(f"queue {name!r}: {exc}") from None
        except NoCredentialsError:
            raise
        except Exception as exc:
            log.warning("queue_lookup_failed", queue=name, error=str(exc))
