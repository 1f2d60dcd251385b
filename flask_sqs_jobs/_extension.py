"""SQSJobs: the Flask extension."""

from __future__ import annotations

import collections.abc as cabc
import datetime
import typing as t
import weakref

from flask import Blueprint
from flask import current_app
from flask import Flask
from flask import Response

from ._flask_hooks import FlaskHooks
from ._producing import Producing
from ._registering import Registering
from ._request_id import add_request_id_header
from ._tasks import TaskRegistry
from .config import AppParts
from .config import Config
from .config import limits_store_error
from .config import load_config
from .config import make_store
from .config import NOT_INITIALISED
from .config import with_unique_release
from .engine import QueueGroup
from .engine.model import HandlerFunc
from .engine.model import Hooks
from .engine.model import JobHandler
from .engine.model import JobMiddleware
from .engine.worker import JobWorker
from .store.model import JobStore
from .store.model import StatusFilter
from .store.records import with_records
from .workflows import with_workflows
from .workflows import Workflows

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from .periodic import Schedule
    from .store.model import JobRecord

F = t.TypeVar("F", bound=HandlerFunc)


class SQSJobs(Registering, Producing, TaskRegistry, Workflows):
    """Background jobs through Amazon SQS for a Flask app.

    Create it once, register handlers on it, and bind it to the app (in an
    application factory, call :meth:`init_app`)::

        jobs = SQSJobs()

        @jobs.handler("send_welcome_email")
        def send_welcome_email(payload: dict) -> None: ...

        def create_app() -> Flask:
            app = Flask(__name__)
            app.config["SQS_JOBS_QUEUES"] = {"default": {"name": "my-app-jobs"}}
            jobs.init_app(app)
            return app

    The configuration is read once, in :meth:`init_app`. The boto3 client is
    created on first use, unless one is given.

    :param app: the app to bind to now.
    :param boto_client: a boto3 SQS client to use instead of creating one from
        the configuration.
    :param middleware: :class:`JobMiddleware` instances, outermost first.
    :param s3_client: a boto3 S3 client for ``SQS_JOBS_LARGE_PAYLOADS``, instead
        of creating one the way boto3 creates any client.
    :param store: the job store (:class:`~flask_sqs_jobs.store.SQLAlchemyStore`
        or :class:`~flask_sqs_jobs.store.DynamoDBStore`), instead of one built
        from ``SQS_JOBS_STORE_URL``.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        boto_client: SQSClient | None = None,
        middleware: cabc.Sequence[JobMiddleware] = (),
        s3_client: t.Any = None,
        store: JobStore | None = None,
    ) -> None:
        if store is not None and not isinstance(store, JobStore):
            raise TypeError(
                "store must be a SQLAlchemyStore or a DynamoDBStore (from"
                f" flask_sqs_jobs.store); got {type(store).__name__}"
            )
        self._boto_client = boto_client
        self._s3_client = s3_client
        self._store = store
        self.middleware: tuple[JobMiddleware, ...] = tuple(middleware)
        #: job type -> handler, shared by every app this instance is bound to.
        self.handlers: dict[str, JobHandler] = {}
        #: schedule name -> :class:`Schedule` (``@jobs.periodic``, ``jobs.schedule``).
        self.schedules: dict[str, Schedule] = {}
        self._parts: weakref.WeakKeyDictionary[Flask, AppParts] = (
            weakref.WeakKeyDictionary()
        )
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read and check the app's ``SQS_JOBS_*`` config and bind to the app.

        Registers the ``flask sqs-worker`` and ``flask sqs-jobs`` commands and
        the request-id hook.

        :raises RuntimeError: the app already has flask-sqs-jobs, or handlers
            declare limits and no store is configured (``SQS_JOBS_STORE_URL``).
        :raises ValueError, TypeError: the configuration is wrong; the message
            names the key, the value and the fix.
        """
        if "sqs_jobs" in app.extensions:
            raise RuntimeError(
                "flask-sqs-jobs is already initialised on this app. Import and use the"
                " existing SQSJobs instance instead of creating a second one."
            )
        config = load_config(app.config)
        store = self._store or make_store(config)
        if error := limits_store_error(self.handlers, store, config.eager):
            raise RuntimeError(error)
        # The workflows' middleware is innermost: it sees how the handler ended.
        middleware, hooks = with_workflows(
            self,
            self.middleware,
            with_records(
                with_unique_release(FlaskHooks(app), store, synchronous=config.eager),
                store,
                enabled=config.record_jobs,
                retention_seconds=config.record_retention_seconds,
                synchronous=config.eager,
                mode=config.record_mode,
                failed_payloads=config.record_failed_payloads,
            ),
        )
        self._parts[app] = AppParts(
            config=config,
            handlers=self.handlers,
            schedules=self.schedules,
            hooks=hooks,
            store=store,
            middleware=middleware,
            boto_client=self._boto_client,
            s3_client=self._s3_client,
        )
        app.extensions["sqs_jobs"] = self

        header = config.request_id_header

        def request_id_header(response: Response) -> Response:
            return add_request_id_header(response, header)

        app.after_request(request_id_header)

        def flush_send_buffer(error: BaseException | None) -> None:
            self._parts[app].flush_send_buffer()

        app.teardown_request(flush_send_buffer)

        from .cli import jobs_command
        from .cli import worker_command

        app.cli.add_command(worker_command)
        app.cli.add_command(jobs_command)

    def dashboard(
        self,
        authorize: cabc.Callable[[], object] | None = None,
        *,
        allow_anonymous: bool = False,
    ) -> Blueprint:
        """A blueprint of the operators' dashboard; register it under a prefix.

        ``authorize()`` is called on every request: ``True`` lets it through, a
        Response it returns is the answer, False or None answers 403, anything
        else 500 (logged). Without it this raises ``ValueError`` unless
        ``allow_anonymous=True``; such a dashboard answers loopback ``Host``
        names only, or the app's ``TRUSTED_HOSTS``. See ``docs/dashboard.md``.
        """
        from .dashboard import make_dashboard

        return make_dashboard(self, authorize, allow_anonymous=allow_anonymous)

    # -- per-app state --------------------------------------------------------

    def parts(self, app: Flask | None = None) -> AppParts:
        """The settings and parts of ``app`` (the current app by default).

        :raises RuntimeError: this extension is not initialised on the app.
        :meta private:
        """
        if app is None:
            app = current_app._get_current_object()  # type: ignore[attr-defined]
        try:
            return self._parts[app]
        except KeyError:
            raise RuntimeError(NOT_INITIALISED) from None

    def config(self, app: Flask | None = None) -> Config:
        """The validated configuration of ``app`` (the current app by default)."""
        return self.parts(app).config

    def store(self, app: Flask | None = None) -> JobStore:
        """The job store of ``app`` (the current app by default).

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        return self.parts(app).require_store()

    def get_job(self, job_id: str, *, app: Flask | None = None) -> JobRecord | None:
        """The record of the job ``job_id``, or None when the store has none.

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        from .store.records import get_job

        parts = self.parts(app)
        return get_job(parts.require_store(), parts.hooks, job_id)

    def find_jobs(
        self,
        tag: str | None = None,
        job_type: str | None = None,
        status: StatusFilter = None,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
        limit: int = 50,
        *,
        app: Flask | None = None,
    ) -> list[JobRecord]:
        """The job records that match every filter given, newest first.

        ``status`` is one status or several; ``since`` and ``until`` (aware
        datetimes) bound the record's last update. Each store answers from an
        index, never a table scan; ``docs/dashboard.md`` says what each can
        search.

        :raises TypeError, ValueError: a filter is wrong.
        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        from .store.model import job_search
        from .store.records import find_jobs

        search = job_search(tag, job_type, status, since, until, limit)
        parts = self.parts(app)
        return find_jobs(parts.require_store(), parts.hooks, search)

    def cancel(self, job_id: str, *, app: Flask | None = None) -> bool:
        """Cancel the job ``job_id``; True when it was known and not finished.

        A job that has not started is deleted unrun when it arrives (outcome
        ``cancelled``); a running one sees ``current_job.cancel_requested``
        (and ``abort_requested``) within one heartbeat. See
        ``docs/flow-control.md``.

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        from .store.records import cancel

        parts = self.parts(app)
        return cancel(parts.require_store(), parts.hooks, job_id)

    def has_store(self, app: Flask | None = None) -> bool:
        """Whether ``app`` has a job store."""
        return self.parts(app).store is not None

    def client(self, app: Flask | None = None) -> SQSClient:
        """The boto3 SQS client of ``app``, created from its config on first use."""
        return self.parts(app).client()

    def queue_group(self, app: Flask | None = None) -> QueueGroup:
        """The :class:`QueueGroup` of ``app``, built on first use.

        Queue names are looked up with GetQueueUrl the first time each queue
        is used. In eager mode the group never calls SQS.
        """
        return self.parts(app).queue_group()

    # -- consuming -------------------------------------------------------------

    def create_worker(
        self,
        app: Flask | None = None,
        *,
        queues: cabc.Iterable[str] | None = None,
        concurrency: int = 1,
        idle_wait_seconds: int | None = None,
        should_stop: cabc.Callable[[], bool] | None = None,
        shutdown_timeout: float | None = None,
        hooks: cabc.Sequence[Hooks] = (),
    ) -> JobWorker:
        """Return a :class:`JobWorker` for the app's handlers.

        :param queues: logical queue names to poll (all by default).
        :param idle_wait_seconds: defaults to ``SQS_JOBS_IDLE_WAIT_SECONDS``.
        :param shutdown_timeout: see :class:`JobWorker`.
        :param hooks: extra engine hooks (metrics) beside the app's signals.
        """
        return self.parts(app).create_worker(
            queues=queues,
            concurrency=concurrency,
            idle_wait_seconds=idle_wait_seconds,
            should_stop=should_stop,
            shutdown_timeout=shutdown_timeout,
            hooks=hooks,
        )
