"""What flask-sqs-jobs keeps per app: its settings and the parts they make.

:class:`AppParts` is the one per-app value. ``SQSJobs.init_app`` builds it
and registers it for the app; the CLI, the dashboard, the periodic scheduler
and the worker's services take it (or the single part they need) instead of
reaching into the extension.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import threading
import typing as t

from flask import current_app
from flask import Flask

from ..engine import JobWorker
from ..engine import QueueGroup
from ..engine.model import Hooks
from ..engine.model import JobHandler
from ..engine.model import JobMiddleware
from ..engine.producing import DEFAULT_WINDOW_SECONDS
from ..engine.producing import eager_queues
from ..engine.producing import EagerSink
from ..engine.producing import SendBuffer
from ..engine.sqs import priority_levels
from ..engine.sqs import S3Client
from ..engine.worker import Heartbeat
from ..engine.worker import JobGuard
from ..engine.worker import JobProcessing
from ..store.model import Cancellations
from ..store.model import JobStore
from ._make import eager_store_options
from ._make import make_large_payloads
from ._make import make_sqs_client
from ._make import worker_store_options
from ._settings import Config
from ._unique import give_unique_keys

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from ..periodic import Schedule
    from ..store.sql import SQLAlchemyStore

#: The message of every store feature used without a store.
NEEDS_A_STORE = (
    "this needs a job store: set SQS_JOBS_STORE_URL (e.g."
    " 'sqlite:///instance/jobs.db' or 'postgresql+psycopg://...') or pass"
    " SQSJobs(store=...)"
)


@dataclasses.dataclass(eq=False)
class AppParts:
    """One app's settings and the parts made from them.

    ``handlers`` and ``schedules`` are the extension's own registries (shared
    by every app it is bound to); the rest is this app's. The SQS client and
    the queue group are made on first use, under :attr:`lock`, and forgotten
    in a forked child (:meth:`forget_clients`).
    """

    config: Config
    handlers: dict[str, JobHandler]
    schedules: dict[str, Schedule]
    hooks: Hooks
    store: JobStore | None
    middleware: tuple[JobMiddleware, ...] = ()
    #: A client given to ``SQSJobs(boto_client=...)``, used instead of a new one.
    boto_client: SQSClient | None = None
    s3_client: S3Client | None = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _client: SQSClient | None = None
    _group: QueueGroup | None = None

    def client(self) -> SQSClient:
        """The boto3 SQS client, created from the config on first use."""
        if self._client is None:
            with self.lock:
                if self._client is None:
                    self._client = self.boto_client or make_sqs_client(self.config)
        return self._client

    def queue_group(self) -> QueueGroup:
        """The :class:`QueueGroup`, built on first use (offline in eager mode)."""
        if self._group is None:
            client = None if self.config.eager else self.client()
            with self.lock:
                if self._group is None:
                    self._group = self._build_group(client)
        return self._group

    def flush_send_buffer(self) -> None:
        """Send what the group's send buffer holds (the end of a request)."""
        group = self._group
        if group is not None and group.send_buffer is not None:
            group.send_buffer.flush()

    def _build_group(self, client: SQSClient | None) -> QueueGroup:
        config = self.config
        if client is None:
            sink = EagerSink(
                self.handlers,
                middleware=self.middleware,
                hooks=self.hooks,
                **eager_store_options(self.store, self.handlers),
            )
            group = QueueGroup(
                eager_queues(config.definitions, sink),
                middleware=self.middleware,
                hooks=self.hooks,
            )
            group.priority_levels = priority_levels(config.definitions.values())
            return give_unique_keys(group, self.store)
        group = QueueGroup.build(
            boto_client=client,
            queues=config.definitions,
            middleware=self.middleware,
            hooks=self.hooks,
            resolve=False,
            large_payloads=make_large_payloads(config, self.s3_client),
        )
        window = config.send_buffer_ms / 1000 or DEFAULT_WINDOW_SECONDS
        group.send_buffer = SendBuffer(group, window)
        return give_unique_keys(group, self.store)

    def require_store(self) -> JobStore:
        """The job store.

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        if self.store is None:
            raise RuntimeError(NEEDS_A_STORE)
        return self.store

    def cancellations(self) -> Cancellations | None:
        """The store's tombstones when jobs can be cancelled (a store keeping
        job records: ``jobs.cancel`` cancels only jobs it knows)."""
        if self.store is None or not self.config.record_jobs:
            return None
        try:
            return self.store.cancellations()
        except NotImplementedError:
            return None

    def outbox_store(self) -> SQLAlchemyStore:
        """The job store, if it can hold the outbox.

        :raises RuntimeError: no store, or a store without SQL tables; the
            message says what to configure.
        """
        from ..store.sql import SQLAlchemyStore

        store = self.require_store()
        if not isinstance(store, SQLAlchemyStore):
            raise RuntimeError(
                "the outbox (enqueue(..., session=)) needs a SQLAlchemyStore on the"
                f" app's own database; this app's store is a {type(store).__name__}."
                " Set SQS_JOBS_STORE_URL to the app's database URL or pass"
                " SQSJobs(store=SQLAlchemyStore(db))"
            )
        return store

    def forget_clients(self) -> None:
        """Drop the cached client and queue group (in a forked child).

        A boto3 client's connection pool must not be shared across a fork: the
        child builds its own on first use. A client given to the constructor is
        kept, as it is the only one there is.
        """
        self.lock = threading.Lock()
        self._client = None
        self._group = None

    def create_worker(
        self,
        *,
        queues: cabc.Iterable[str] | None = None,
        concurrency: int = 1,
        idle_wait_seconds: int | None = None,
        should_stop: cabc.Callable[[], bool] | None = None,
        shutdown_timeout: float | None = None,
        hooks: cabc.Sequence[Hooks] = (),
    ) -> JobWorker:
        """A :class:`JobWorker` for the handlers; see ``SQSJobs.create_worker``."""
        group = self.queue_group()
        if queues is not None:
            group = group.subset(queues)
        wait = (
            self.config.idle_wait_seconds
            if idle_wait_seconds is None
            else idle_wait_seconds
        )
        return JobWorker(
            group,
            self.handlers,
            should_stop=should_stop,
            idle_wait_seconds=wait,
            concurrency=concurrency,
            shutdown_timeout=shutdown_timeout,
            hooks=hooks,
            **worker_store_options(self.store, self.handlers),
            cancellations=self.cancellations(),
        )

    def create_processing(self, heartbeat: Heartbeat) -> JobProcessing:
        """Both phases of one delivery, with the parts a worker of this app has.

        For the AWS Lambda handler: the same handlers, middleware, hooks
        (app context, signals, job records) and store options as
        :meth:`create_worker`'s worker, under ``heartbeat``.
        """
        group = self.queue_group()
        options = worker_store_options(self.store, self.handlers)
        guard = JobGuard.for_handlers(
            self.handlers,
            options.get("idempotency_keys"),
            options.get("session_factory"),
            options.get("limit_store"),
        )
        return JobProcessing.build(
            self.handlers,
            group.middleware,
            heartbeat,
            group.hooks,
            guard,
            tombstones=self.cancellations(),
        )


#: The message when an app has no flask-sqs-jobs.
NOT_INITIALISED = (
    "flask-sqs-jobs is not initialised on this app; call jobs.init_app(app) in"
    " your application factory."
)


def parts_of(app: Flask | None = None) -> AppParts:
    """The :class:`AppParts` of ``app`` (the current app by default).

    :raises RuntimeError: flask-sqs-jobs is not initialised on the app.
    """
    if app is None:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
    extension = app.extensions.get("sqs_jobs")
    if extension is None:
        raise RuntimeError(NOT_INITIALISED)
    parts: AppParts = extension.parts(app)
    return parts
