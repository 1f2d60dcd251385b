"""The outbox in ``flask sqs-worker``: its relay as a worker service, its metrics."""

from __future__ import annotations

import math
import threading
import time
import typing as t

import structlog

if t.TYPE_CHECKING:
    from ...engine import QueueGroup
    from ...engine.model import WorkerService
    from ...engine.ops import PrometheusMetrics
    from ..model import JobStore
    from ..sql import SQLAlchemyStore

log = structlog.get_logger(__name__)

#: How long one reading of the outbox serves the metrics' scrapes.
_METRICS_CACHE_SECONDS = 1.0


def outbox_relay_services(
    store: JobStore | None,
    group: QueueGroup,
    *,
    max_attempts: int | None = None,
    relays: int | None = None,
) -> list[WorkerService]:
    """The outbox relay, with a SQLAlchemy store.

    :param max_attempts: ``SQS_JOBS_OUTBOX_MAX_ATTEMPTS``.
    :param relays: ``SQS_JOBS_OUTBOX_RELAYS``: how many relays of the fleet
        may be active at once (None: every relay runs).
    """
    sql_store = _sql_store(store)
    if sql_store is None:
        return []
    from ._relay import OutboxRelay
    from ._relay_lease import RelayLease

    # A worker process forked by the supervisor must not share its parent's
    # pooled connections (SQLAlchemy's advice for forks).
    sql_store.engine.dispose(close=False)
    lease = None if relays is None else RelayLease(sql_store.limits(), relays)
    return [
        OutboxRelay(sql_store.engine, group, max_attempts=max_attempts, lease=lease)
    ]


def bind_outbox_metrics(metrics: PrometheusMetrics, store: JobStore | None) -> None:
    """Add ``sqs_jobs_outbox_pending``, ``sqs_jobs_outbox_oldest_age_seconds``
    and ``sqs_jobs_outbox_parked``.

    Read from the store at scrape time (at most once a second); NaN while the
    database cannot be read.
    """
    sql_store = _sql_store(store)
    if sql_store is None:
        return
    import prometheus_client

    reading = _OutboxReading(sql_store)
    pending = prometheus_client.Gauge(
        "sqs_jobs_outbox_pending",
        "Jobs in the transactional outbox, not sent to SQS yet.",
        registry=metrics.registry,
    )
    oldest = prometheus_client.Gauge(
        "sqs_jobs_outbox_oldest_age_seconds",
        "Age of the oldest job in the outbox (0 when it is empty).",
        registry=metrics.registry,
    )
    parked = prometheus_client.Gauge(
        "sqs_jobs_outbox_parked",
        "Jobs parked in the outbox: no longer sent until retried"
        " (flask sqs-jobs outbox list --parked).",
        registry=metrics.registry,
    )
    pending.set_function(lambda: reading.get()[0])
    oldest.set_function(lambda: reading.get()[1])
    parked.set_function(lambda: reading.get()[2])


class _OutboxReading:
    """The outbox's pending count, oldest age and parked count, read at most
    once a second.

    Contract: :meth:`get` is called by the Prometheus registry's collection,
    from whichever thread serves the scrape; its lock serialises the reads,
    so concurrent scrapes share one query. It owns nothing but its cache.
    """

    def __init__(self, store: SQLAlchemyStore) -> None:
        self._engine = store.engine
        self._lock = threading.Lock()
        self._at = -math.inf
        self._value = (math.nan, math.nan, math.nan)

    def get(self) -> tuple[float, float, float]:
        """``(pending, oldest age in seconds, parked)``; NaNs while the store fails."""
        from ._parking import status
        from ._send import describe_error

        with self._lock:
            if time.monotonic() - self._at < _METRICS_CACHE_SECONDS:
                return self._value
            try:
                with self._engine.connect() as connection:
                    queues = status(connection)
            except Exception as exc:
                log.warning("outbox_metrics_failed", error=describe_error(exc))
                self._value = (math.nan, math.nan, math.nan)
            else:
                self._value = (
                    float(sum(q.pending for q in queues)),
                    max((q.oldest_age_seconds for q in queues), default=0.0),
                    float(sum(q.parked for q in queues)),
                )
            self._at = time.monotonic()
            return self._value


def _sql_store(store: JobStore | None) -> SQLAlchemyStore | None:
    """The store when it can hold the outbox (SQL), else None."""
    if store is None:
        return None
    if store.kind != "sqlalchemy":
        return None
    return t.cast("SQLAlchemyStore", store)
