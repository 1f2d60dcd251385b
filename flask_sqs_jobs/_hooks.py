"""The engine hooks of a Flask app: an app context per job, and blinker signals."""

from __future__ import annotations

import typing as t
import weakref

import structlog
from blinker import NamedSignal
from flask import Flask

from . import signals
from .engine.model import Hooks
from .engine.model import Job
from .engine.model import Outcome

log = structlog.get_logger(__name__)


def send_signal(signal: NamedSignal, sender: Flask, **kwargs: t.Any) -> None:
    """Call each receiver in turn; one that raises is logged and the rest still run."""
    if not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, **kwargs)
        except Exception:
            log.exception(
                "signal_receiver_failed",
                signal=signal.name,
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
            )


class FlaskHooks(Hooks):
    """An app context around each job, and signals sent with the app as sender."""

    def __init__(self, app: Flask) -> None:
        self._app = weakref.ref(app)

    @property
    def app(self) -> Flask:
        app = self._app()
        if app is None:  # pragma: no cover - the app outlives its jobs
            raise RuntimeError("the Flask app of this worker no longer exists")
        return app

    def job_context(self, job: Job) -> t.ContextManager[object]:
        return self.app.app_context()

    def job_enqueued(self, job: Job, message_id: str) -> None:
        send_signal(
            signals.job_enqueued,
            self.app,
            job=job,
            queue=job.queue,
            message_id=message_id,
        )

    def job_started(self, job: Job) -> None:
        send_signal(
            signals.job_started,
            self.app,
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
    ) -> None:
        send_signal(
            signals.job_finished,
            self.app,
            job=job,
            queue=job.queue,
            message_id=job.message_id,
            outcome=outcome,
            duration_ms=duration_ms,
            exception=exception,
        )

    def worker_started(self, queues: list[str]) -> None:
        send_signal(signals.worker_started, self.app, queues=queues)

    def worker_stopped(self, reason: str) -> None:
        send_signal(signals.worker_stopped, self.app, reason=reason)
