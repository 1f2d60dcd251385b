"""Services: threads that run beside a worker, started after it and stopped after it."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import typing as t

import structlog

log = structlog.get_logger(__name__)


class WorkerService(t.Protocol):
    """A thread (or a few) with a start and a graceful stop.

    The jobs layer adds such threads to every worker process (the outbox
    relay, the scheduler, the worker's own row in the store); :func:`running`
    starts them in order once the worker is built and stops them in reverse.
    """

    #: A short name for logs: ``outbox_relay``, ``scheduler``, ...
    name: str

    def start(self) -> None:
        """Start the service; return at once."""

    def stop(self) -> None:
        """Stop the service and wait for its threads."""


@contextlib.contextmanager
def running(services: cabc.Sequence[WorkerService]) -> t.Iterator[None]:
    """Start ``services`` in order; stop the started ones in reverse on exit.

    A service that fails to stop is logged (``worker_service_stop_failed``)
    and the others are still stopped.
    """
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
