"""The services one ``flask sqs-worker`` process runs beside its worker.

The jobs layer adds threads to every worker process: the scheduler (periodic
jobs), the worker's own row in the store, and the outbox relay. Each is a
:class:`~flask_sqs_jobs.engine.worker.WorkerService`; this module picks them
from the app's parts and the command line.
"""

from __future__ import annotations

import typing as t

from flask import Flask

from ..config import AppParts
from ..engine.model import report_error
from ..engine.model import WorkerService
from ..engine.worker import JobWorker
from ..store.outbox import outbox_relay_services
from ..store.records import presence_of


def worker_services(
    app: Flask, parts: AppParts, worker: JobWorker, options: t.Any
) -> list[WorkerService]:
    """The services one worker process runs, given its command-line options."""
    services: list[WorkerService] = []
    config = parts.config
    if parts.schedules and config.scheduler == "embedded":
        from ..periodic import scheduler_service

        scheduler = scheduler_service(
            app, parts.schedules, parts.queue_group(), parts.store, worker.hooks
        )
        if scheduler is not None:
            services.append(scheduler)
    services.extend(
        presence_of(
            parts.store,
            worker,
            queue_names=list(options.queue_names or config.queues),
            concurrency=options.concurrency,
            record_jobs=config.record_jobs,
            retention_seconds=config.record_retention_seconds,
            lost_worker_retention_seconds=config.lost_worker_retention_seconds,
            on_error=lambda error: report_error(worker.hooks, None, error, "store"),
        )
    )
    if getattr(options, "outbox_relay", True):
        services += outbox_relay_services(
            parts.store,
            parts.queue_group(),
            max_attempts=config.outbox_max_attempts,
            relays=config.outbox_relays,
        )
    return services
