"""``make_handler``: the Lambda entry point that runs the app's jobs from SQS."""

from __future__ import annotations

import collections.abc as cabc
import threading
import time
import typing as t

import boto3
import structlog
from flask import Flask

from ..config import missing_store_error
from ..config import parts_of
from ..engine.unique import flush_releases
from ..engine.worker import Heartbeat
from ..store.records import recorder_of
from ._batch import BatchRunner
from ._batch import check_min_remaining
from ._batch import DEFAULT_MIN_REMAINING_SECONDS
from ._batch import LambdaContext
from ._batch import remaining_seconds
from ._mapping_check import MappingCheck
from ._records import sqs_records
from ._sources import EventSources

log = structlog.get_logger(__name__)

#: How long the end of an invocation waits at most for job records to be
#: written and unique keys to be freed.
FLUSH_SECONDS = 5.0

BatchResponse: t.TypeAlias = dict[str, list[dict[str, str]]]


class LambdaHandler:
    """A Lambda function's handler for SQS events: ``handler(event, context)``.

    Made by :func:`make_handler`. The app (or the factory's app) and
    everything made from it (clients, queues, the runner and settler, the
    heartbeat's thread) are made once per execution environment, on the first
    event, and reused by every later one.
    """

    def __init__(
        self,
        app_or_factory: Flask | cabc.Callable[[], Flask],
        *,
        min_remaining_seconds: float = DEFAULT_MIN_REMAINING_SECONDS,
        check_mapping: bool = True,
        lambda_client: t.Any = None,
    ) -> None:
        if not isinstance(app_or_factory, Flask) and not callable(app_or_factory):
            raise TypeError(
                "make_handler takes a Flask app or a function of no arguments that"
                f" returns one; got {type(app_or_factory).__name__}"
            )
        self._source = app_or_factory
        self._min_remaining = check_min_remaining(min_remaining_seconds)
        self._lock = threading.Lock()
        self._app: Flask | None = None
        self._runner: BatchRunner | None = None
        self._check: MappingCheck | None = None
        if check_mapping:
            self._check = MappingCheck(lambda: lambda_client or boto3.client("lambda"))

    @property
    def app(self) -> Flask:
        """The app whose jobs this handler runs (made on first use)."""
        self._prepared()
        assert self._app is not None
        return self._app

    def __call__(self, event: object, context: LambdaContext) -> BatchResponse:
        """Run the event's records; return the records that must come back."""
        records = sqs_records(event)
        runner = self._prepared()
        request_id = getattr(context, "aws_request_id", None)
        with structlog.contextvars.bound_contextvars(
            **({"lambda_request_id": request_id} if isinstance(request_id, str) else {})
        ):
            response = runner.run(records, context)
            self._flush_records(context)
            if response["batchItemFailures"] and self._check is not None:
                self._check.after_failures(records[0]["eventSourceARN"], context)
        return response

    def _prepared(self) -> BatchRunner:
        """The runner of this environment, made on the first call."""
        if self._runner is None:
            with self._lock:
                if self._runner is None:
                    self._runner = self._build()
        return self._runner

    def _build(self) -> BatchRunner:
        source = self._source
        app = source if isinstance(source, Flask) else source()
        if not isinstance(app, Flask):
            raise TypeError(
                "make_handler's factory must return a Flask app; it returned"
                f" {type(app).__name__}"
            )
        parts = parts_of(app)
        if not parts.handlers:
            raise RuntimeError(
                "flask_sqs_jobs.aws_lambda: the app registers no job handlers;"
                " decorate functions with @jobs.task or @jobs.handler in a module"
                " the app imports"
            )
        if parts.config.eager:
            raise RuntimeError(
                "flask_sqs_jobs.aws_lambda: SQS_JOBS_EAGER is on, so jobs run inline"
                " at enqueue and nothing reaches SQS; turn it off for the function"
            )
        if parts.store is None and (error := missing_store_error(parts.handlers)):
            raise RuntimeError(f"flask_sqs_jobs.aws_lambda: {error}")
        heartbeat = Heartbeat()
        heartbeat.start()
        self._app = app
        log.info("lambda_handler_ready", job_types=sorted(parts.handlers))
        return BatchRunner(
            parts.create_processing(heartbeat),
            heartbeat,
            EventSources(parts.queue_group()),
            self._min_remaining,
        )

    def _flush_records(self, context: LambdaContext) -> None:
        """Wait for what this invocation's jobs left to write: job records and
        freed unique keys (the environment may be frozen once it returns)."""
        assert self._app is not None
        deadline = time.monotonic() + max(
            0.0, min(FLUSH_SECONDS, remaining_seconds(context) - 0.2)
        )
        recorder = recorder_of(parts_of(self._app).hooks)
        if recorder is not None and not recorder.writer.flush(
            timeout=max(0.0, deadline - time.monotonic())
        ):
            log.warning("lambda_records_unflushed")
        if not flush_releases(max(0.0, deadline - time.monotonic())):
            log.warning("lambda_unique_keys_unflushed")


def make_handler(
    app_or_factory: Flask | cabc.Callable[[], Flask],
    *,
    min_remaining_seconds: float = DEFAULT_MIN_REMAINING_SECONDS,
    check_mapping: bool = True,
    lambda_client: t.Any = None,
) -> LambdaHandler:
    """A Lambda handler that runs SQS records as the worker runs jobs.

    ``handler = make_handler(create_app)`` at module level; point the
    function's SQS event source mapping (with ``ReportBatchItemFailures``) at
    the app's queue. See ``docs/lambda.md``.

    :param app_or_factory: the app, or a function of no arguments returning
        it (called once per execution environment, on the first event).
    :param min_remaining_seconds: a record is started only with at least this
        long left of the invocation; the others come back to the queue.
    :param check_mapping: the first time records are reported, ask Lambda
        whether the mapping has ``ReportBatchItemFailures`` (and warn if not).
    :param lambda_client: the boto3 Lambda client for that check.
    """
    return LambdaHandler(
        app_or_factory,
        min_remaining_seconds=min_remaining_seconds,
        check_mapping=check_mapping,
        lambda_client=lambda_client,
    )
