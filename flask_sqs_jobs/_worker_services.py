"""Background services that run beside the worker in ``flask sqs-worker``.

The jobs layer adds threads to every worker process (the outbox relay, the
scheduler, the worker's own registration in the store): each is a
:class:`WorkerService`, started after the worker is built and stopped after
it stops, in reverse order.
"""

from __future__ import annotations

import contextlib
import typing as t

import structlog
from flask import Flask

from .store.outbox import outbox_relay_services
from .store.records import presence_of

if t.TYPE_CHECKING:
    from ._extension import SQSJobs
    from .engine.worker import JobWorker

log = structlog.get_logger(__name__)


class WorkerService(t.Protocol):
    """A thread (or a few) with a start and a graceful stop."""

    #: A short name for logs: ``outbox_relay``, ``scheduler``, ...
    name: str

    def start(self) -> None:
        """Start the service; return at once."""

    def stop(self) -> None:
        """Stop the service and wait for its threads."""


def worker_services(
    app: Flask, jobs: SQSJobs, worker: JobWorker, options: t.Any
) -> list[WorkerService]:
    """The services one worker process runs, given its command-line options."""
    services: list[WorkerService] = []
    if jobs.schedules:
        from .periodic import scheduler_service

        if (scheduler := scheduler_service(app, jobs, worker._hooks)) is not None:
            services.append(scheduler)
    services.extend(presence_of(app, jobs, worker, options))
    services += outbox_relay_services(app, jobs, options)
    return services


@contextlib.contextmanager
def running(services: list[WorkerService]) -> t.Iterator[None]:
    """Start ``services`` in order; stop the started ones in reverse on exit."""
    started: list[WorkerService] = []
    try:
        for service in services:
            service.start()
            started.append(service)
        yield
    finally:
        for service in reversed(started):
            try:
                service.stop()
            except Exception:
                log.exception("worker_service_stop_failed", service=service.name)
