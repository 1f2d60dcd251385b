"""What tasks and the outbox need of :class:`~flask_sqs_jobs.SQSJobs`, as a type.

Tasks, their enqueue helpers and the Flask side of the outbox are called by the
extension; typing them against this protocol instead of ``SQSJobs`` keeps the
imports one way (``_extension`` imports them, never the reverse).
"""

from __future__ import annotations

import typing as t

from flask import Flask

from .config import AppParts
from .config import Config
from .engine import QueueGroup

if t.TYPE_CHECKING:
    from .store.model import JobRecord
    from .store.model import JobStore


class JobsFacade(t.Protocol):
    """The part of ``SQSJobs`` that tasks and the outbox call."""

    def config(self, app: Flask | None = None) -> Config: ...

    def parts(self, app: Flask | None = None) -> AppParts: ...

    def queue_group(self, app: Flask | None = None) -> QueueGroup: ...

    def store(self, app: Flask | None = None) -> JobStore: ...

    def get_job(self, job_id: str, *, app: Flask | None = None) -> JobRecord | None: ...

    def enqueue(self, *args: t.Any, **kwargs: t.Any) -> str: ...

    def enqueue_many(self, *args: t.Any, **kwargs: t.Any) -> list[str]: ...

    def handler(self, *args: t.Any, **kwargs: t.Any) -> t.Any: ...
