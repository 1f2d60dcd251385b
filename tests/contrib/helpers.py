"""Helpers for the integrations' tests: an app whose view enqueues a job."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import typing as t

from flask import Flask
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.testing import FinishedJob
from flask_sqs_jobs.testing import work_off

if t.TYPE_CHECKING:
    from structlog.typing import EventDict

#: The job the test view enqueues.
JOB_TYPE = "send_welcome_email"


@dataclasses.dataclass
class JobApp:
    """A Flask app with one view (``POST /signup``) that enqueues :data:`JOB_TYPE`.

    The handler records each payload it is called with, runs :attr:`probe`,
    then raises :attr:`failure` if one is set.
    """

    app: Flask
    jobs: SQSJobs
    calls: list[dict[str, t.Any]] = dataclasses.field(default_factory=list)
    failure: Exception | None = None
    #: Called inside the handler; what it returns is appended to :attr:`probed`.
    probe: cabc.Callable[[], object] | None = None
    probed: list[object] = dataclasses.field(default_factory=list)
    #: Entered around the enqueue inside the view (e.g. a server span).
    around_enqueue: cabc.Callable[[], t.ContextManager[object]] = contextlib.nullcontext

    def signup(self) -> str:
        """Make the request; return the MessageId of the job it enqueued."""
        response = self.app.test_client().post("/signup")
        assert response.status_code == 200, response.text
        return str(response.json["message_id"])  # type: ignore[index]

    def work_off(self) -> list[FinishedJob]:
        """Run a worker until the queue is empty; return how each job ended."""
        return work_off(self.app)


class MakeJobApp(t.Protocol):
    def __call__(self, *middleware: JobMiddleware, eager: bool = False) -> JobApp: ...


def only_event(logs: list[EventDict], event: str) -> EventDict:
    """The one log entry named ``event``."""
    found = [entry for entry in logs if entry["event"] == event]
    assert len(found) == 1, f"expected one {event!r}, got {found}"
    return found[0]
