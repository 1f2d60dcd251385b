"""SQSJobs: the Flask extension."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import threading
import typing as t
import weakref

from flask import Blueprint
from flask import current_app
from flask import Flask
from flask import Response

from ._config import Config
from ._config import load_config
from ._hooks import FlaskHooks
from ._idempotent_handlers import eager_store_options
from ._idempotent_handlers import worker_store_options
from ._large_payloads_setup import make_large_payloads
from ._producing import Producing
from ._registering import Registering
from ._request_id import add_request_id_header
from ._sqs_client import make_sqs_client
from ._store_setup import make_store
from ._tasks import TaskRegistry
from .engine import QueueGroup
from .engine.model import HandlerFunc
from .engine.model import Hooks
from .engine.model import JobHandler
from .engine.model import JobMiddleware
from .engine.producing import eager_queues
from .engine.producing import EagerSink
from .engine.worker import JobWorker
from .store.model import JobStore
from .store.records import with_records

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from .periodic import Schedule
    from .store.model import JobRecord

F = t.TypeVar("F", bound=HandlerFunc)


@dataclasses.dataclass
class _State:
    """What the extension keeps per app."""

    config: Config
    hooks: Hooks
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    client: SQSClient | None = None
    group: QueueGroup | None = None
    store: JobStore | None = None


class SQSJobs(Registering, Producing, TaskRegistry):
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
        self._state: weakref.WeakKeyDictionary[Flask, _State] = (
            weakref.WeakKeyDictionary()
        )
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read and check the app's ``SQS_JOBS_*`` config and bind to the app.

        Registers the ``flask sqs-worker`` and ``flask sqs-jobs`` commands and
        the request-id hook.

        :raises RuntimeError: the app already has flask-sqs-jobs.
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
        hooks = with_records(FlaskHooks(app), config, store)
        self._state[app] = _State(config=config, hooks=hooks, store=store)
        app.extensions["sqs_jobs"] = self

        header = config.request_id_header

        def request_id_header(response: Response) -> Response:
            return add_request_id_header(response, header)

        app.after_request(request_id_header)

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

        ``authorize()`` is called on every request: False answers 403. Without
        it this raises ``ValueError`` unless ``allow_anonymous=True``. See
        ``docs/dashboard.md``.
        """
        from .dashboard import make_dashboard

        return make_dashboard(self, authorize, allow_anonymous=allow_anonymous)

    # -- per-app state --------------------------------------------------------

    def _get_state(self, app: Flask | None = None) -> _State:
        if app is None:
            app = current_app._get_current_object()  # type: ignore[attr-defined]
        try:
            return self._state[app]
        except KeyError:
            raise RuntimeError(
                "flask-sqs-jobs is not initialised on this app; call"
                " jobs.init_app(app) in your application factory."
            ) from None

    def _forget_clients(self, app: Flask) -> None:
        """Drop ``app``'s cached client and queue group (in a forked child).

        A boto3 client's connection pool must not be shared across a fork: the
        child builds its own on first use. A client given to the constructor is
        kept, as it is the only one there is.
        """
        state = self._get_state(app)
        state.lock = threading.Lock()
        state.client = None
        state.group = None

    def config(self, app: Flask | None = None) -> Config:
        """The validated configuration of ``app`` (the current app by default)."""
        return self._get_state(app).config

    def store(self, app: Flask | None = None) -> JobStore:
        """The job store of ``app`` (the current app by default).

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        store = self._get_state(app).store
        if store is None:
            raise RuntimeError(
                "this needs a job store: set SQS_JOBS_STORE_URL (e.g."
                " 'sqlite:///instance/jobs.db' or 'postgresql+psycopg://...') or pass"
                " SQSJobs(store=...)"
            )
        return store

    def get_job(self, job_id: str, *, app: Flask | None = None) -> JobRecord | None:
        """The record of the job ``job_id``, or None when the store has none.

        :raises RuntimeError: no store is configured; the message names
            ``SQS_JOBS_STORE_URL``.
        """
        from ._records_access import get_job

        return get_job(self.store(app), self._get_state(app).hooks, job_id)

    def has_store(self, app: Flask | None = None) -> bool:
        """Whether ``app`` has a job store."""
        return self._get_state(app).store is not None

    def client(self, app: Flask | None = None) -> SQSClient:
        """The boto3 SQS client of ``app``, created from its config on first use."""
        state = self._get_state(app)
        if state.client is None:
            with state.lock:
                if state.client is None:
                    state.client = self._boto_client or make_sqs_client(state.config)
        return state.client

    def queues(self, app: Flask | None = None) -> QueueGroup:
        """The :class:`QueueGroup` of ``app``, built on first use.

        Queue names are looked up with GetQueueUrl the first time each queue
        is used. In eager mode the group never calls SQS.
        """
        state = self._get_state(app)
        if state.group is None:
            client = None if state.config.eager else self.client(app)
            with state.lock:
                if state.group is None:
                    state.group = self._build_group(state, client)
        return state.group

    def _build_group(self, state: _State, client: SQSClient | None) -> QueueGroup:
        config = state.config
        if client is None:
            sink = EagerSink(
                self.handlers,
                middleware=self.middleware,
                hooks=state.hooks,
                **eager_store_options(state.store, self.handlers),
            )
            return QueueGroup(
                eager_queues(config.definitions, sink),
                middleware=self.middleware,
                hooks=state.hooks,
            )
        return QueueGroup.build(
            boto_client=client,
            queues=config.definitions,
            middleware=self.middleware,
            hooks=state.hooks,
            resolve=False,
            large_payloads=make_large_payloads(config, self._s3_client),
        )

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
        state = self._get_state(app)
        group = self.queues(app)
        if queues is not None:
            group = group.subset(queues)
        wait = idle_wait_seconds
        return JobWorker(
            group,
            self.handlers,
            should_stop=should_stop,
            idle_wait_seconds=state.config.idle_wait_seconds if wait is None else wait,
            concurrency=concurrency,
            shutdown_timeout=shutdown_timeout,
            hooks=hooks,
            **worker_store_options(state.store, self.handlers),
        )
