"""The engine hooks of a Flask app: an app context per job, and blinker signals."""

from __future__ import annotations

import contextlib
import typing as t
import weakref

import structlog
from blinker import NamedSignal
from flask import Flask
from flask import has_app_context

from . import signals
from .engine.model import ErrorKind
from .engine.model import Hooks
from .engine.model import Job
from .engine.model import Outcome

log = structlog.get_logger(__name__)


def send_signal(signal: NamedSignal, sender: Flask, **kwargs: t.Any) -> list[Exception]:
    """Call each receiver in turn; one that raises is logged and the rest still run.

    Returns what the failing receivers raised.
    """
    if not signal.receivers:
        return []
    failures = []
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, **kwargs)
        except Exception as exc:
            log.exception(
                "signal_receiver_failed",
                signal=signal.name,
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
            )
            failures.append(exc)
    return failures


class FlaskHooks(Hooks):
    """An app context around each job, and signals sent with the app as sender.

    A signal receiver that raises is reported to the ``worker_error``
    receivers (kind ``"hook"``), except one of ``worker_error`` itself.
    """

    def __init__(self, app: Flask) -> None:
        self._app = weakref.ref(app)

    @property
    def app(self) -> Flask:
        app = self._app()
        if app is None:  # pragma: no cover - the app outlives its jobs
            raise RuntimeError("the Flask app of this worker no longer exists")
        return app

    def _send(self, signal: NamedSignal, /, **kwargs: t.Any) -> None:
        """Send ``signal``; report each receiver that raised as a ``worker_error``."""
        for failure in send_signal(signal, self.app, **kwargs):
            self.worker_error(kwargs.get("queue"), failure, "hook")

    def job_context(self, job: Job) -> t.ContextManager[object]:
        return self.app.app_context()

    # Each job hook returns before building its arguments when its signal has
    # no receivers: most apps connect none, and these run several times a job.

    def job_enqueued(self, job: Job, message_id: str) -> None:
        if not signals.job_enqueued.receivers:
            return
        self._send(
            signals.job_enqueued,
            job=job,
            queue=job.queue,
            message_id=message_id,
        )

    def job_received(self, job: Job) -> None:
        if not signals.job_received.receivers:
            return
        self._send(
            signals.job_received,
            job=job,
            queue=job.queue,
            message_id=job.message_id,
            receive_count=job.receive_count,
        )

    def job_started(self, job: Job) -> None:
        if not signals.job_started.receivers:
            return
        self._send(
            signals.job_started,
            job=job,
            queue=job.queue,
            message_id=job.message_id,
            receive_count=job.receive_count,
        )

    def job_finished(
        self,
        job: Job,
        outcome: Outcome,
        duration_ms: float,
        exception: BaseException | None,
        *,
        result: object = None,
        will_retry: bool = False,
    ) -> None:
        if not signals.job_finished.receivers:
            return
        self._send(
            signals.job_finished,
            job=job,
            queue=job.queue,
            message_id=job.message_id,
            outcome=outcome,
            duration_ms=duration_ms,
            exception=exception,
            result=result,
            will_retry=will_retry,
        )

    def worker_started(self, queues: list[str]) -> None:
        self._send(signals.worker_started, queues=queues)

    def worker_stopped(self, reason: str) -> None:
        self._send(signals.worker_stopped, reason=reason)

    def worker_error(
        self, queue: str | None, exception: BaseException, kind: ErrorKind
    ) -> None:
        # A failure may happen on any of the worker's threads (a receive, the
        # heartbeat's renewals, the record writer): its receivers get the
        # app's context all the same.
        app = self.app
        context = contextlib.nullcontext() if has_app_context() else app.app_context()
        with context:
            send_signal(
                signals.worker_error, app, queue=queue, exception=exception, kind=kind
            )
