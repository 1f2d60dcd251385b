"""Prometheus metrics for a worker (the ``metrics`` extra, prometheus-client).

Series: ``sqs_jobs_jobs_total{queue,job_type,outcome}``,
``sqs_jobs_job_duration_seconds{queue,job_type}`` (histogram),
``sqs_jobs_queue_wait_seconds{queue}`` (histogram: receive time minus sent time),
``sqs_jobs_receive_errors_total{queue}``, ``sqs_jobs_busy_slots``,
``sqs_jobs_concurrency`` (slots; utilisation is busy / concurrency),
``sqs_jobs_last_receive_age_seconds``, ``sqs_jobs_healthy`` (1 while ``/healthz``
would answer 200), ``sqs_jobs_malformed_total{queue,reason}``,
``sqs_jobs_unknown_job_type_total{queue}``, ``sqs_jobs_schedule_ticks_total{schedule}``
``sqs_jobs_store_errors_total{part}`` (failed job-store writes of this process)
and ``sqs_jobs_limited_total{limit}`` (jobs a limit kept from starting).
"""

from __future__ import annotations

import collections.abc as cabc
import time
import typing as t

try:
    import prometheus_client
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'Prometheus metrics need the "metrics" extra:'
        ' pip install "flask-sqs-jobs[metrics]"'
    ) from exc

from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..flow import JobLimited
from ..model import Hooks
from ..model import Job
from ..model import Outcome
from ._store_errors import store_error_counts

if t.TYPE_CHECKING:
    from ..model import WorkerCounts
    from ..worker import JobWorker

#: ``/healthz``'s limit, for a worker whose metrics are bound without a health
#: server (``HealthServer`` binds its own rule).
DEFAULT_HEALTH_MAX_AGE = 60.0

#: Job durations range from milliseconds to the hour-long maximum runtime.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3600,
)


class PrometheusMetrics(Hooks):
    """Count jobs and receive errors of one worker, in a registry of its own.

    Pass it to the worker as a hook, then :meth:`bind` the worker for the
    gauges::

        metrics = PrometheusMetrics()
        worker = JobWorker(queues, handlers, hooks=[metrics])
        metrics.bind(worker)
    """

    def __init__(
        self, registry: prometheus_client.CollectorRegistry | None = None
    ) -> None:
        self.registry = registry or prometheus_client.CollectorRegistry()
        self.jobs = prometheus_client.Counter(
            "sqs_jobs_jobs",
            "Jobs finished, by outcome.",
            ["queue", "job_type", "outcome"],
            registry=self.registry,
        )
        self.limited = prometheus_client.Counter(
            "sqs_jobs_limited",
            "Jobs a limit kept from starting (outcome limited), by limit.",
            ["limit"],
            registry=self.registry,
        )
        self.queue_wait = prometheus_client.Histogram(
            "sqs_jobs_queue_wait_seconds",
            "Time from SQS accepting a job's message to a worker receiving it.",
            ["queue"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.duration = prometheus_client.Histogram(
            "sqs_jobs_job_duration_seconds",
            "Time from a job's start to its message being settled.",
            ["queue", "job_type"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.receive_errors = prometheus_client.Counter(
            "sqs_jobs_receive_errors",
            "Failed ReceiveMessage calls (and failed queue look-ups).",
            ["queue"],
            registry=self.registry,
        )
        self.schedule_ticks = prometheus_client.Counter(
            "sqs_jobs_schedule_ticks",
            "Ticks of periodic jobs this worker enqueued.",
            ["schedule"],
            registry=self.registry,
        )
        self.busy_slots = prometheus_client.Gauge(
            "sqs_jobs_busy_slots", "Jobs running now.", registry=self.registry
        )
        self.concurrency = prometheus_client.Gauge(
            "sqs_jobs_concurrency", "Jobs that may run at once.", registry=self.registry
        )
        self.last_receive_age = prometheus_client.Gauge(
            "sqs_jobs_last_receive_age_seconds",
            "Seconds since a receive last completed, empty or not.",
            registry=self.registry,
        )

        self._health: cabc.Callable[[], bool] = lambda: False
        self._counts: WorkerCounts | None = None
        self.registry.register(_Healthy(lambda: self._health()))
        self.registry.register(_WorkerCounts(lambda: self._counts))
        self.registry.register(_StoreErrors())

    def bind(self, worker: JobWorker) -> None:
        """Read the gauges and the worker's counts from ``worker`` at each scrape.

        ``sqs_jobs_healthy`` follows ``/healthz``'s rule with its default
        limit until a :class:`~flask_sqs_jobs.engine.HealthServer` serving
        these metrics binds its own (:meth:`bind_health`).
        """
        self.busy_slots.set_function(lambda: worker.busy_slots)
        self.concurrency.set_function(lambda: worker.concurrency)
        self.last_receive_age.set_function(lambda: worker.last_receive_age or 0.0)
        self._counts = worker.counts
        bound_at = time.monotonic()

        def healthy() -> bool:
            if worker.busy_slots:
                return True
            age = worker.last_receive_age
            if age is None:
                age = time.monotonic() - bound_at
            return age <= DEFAULT_HEALTH_MAX_AGE

        self._health = healthy

    def bind_health(self, healthy: cabc.Callable[[], bool]) -> None:
        """Read ``sqs_jobs_healthy`` from ``healthy`` (what ``/healthz`` says)."""
        self._health = healthy

    def render(self) -> tuple[bytes, str]:
        """Return the exposition text and its content type."""
        return prometheus_client.generate_latest(self.registry), (
            prometheus_client.CONTENT_TYPE_LATEST
        )

    def job_received(self, job: Job) -> None:
        if job.sent_at is not None:
            # Clocks differ a little between SQS and this host: never below 0.
            self.queue_wait.labels(job.queue).observe(
                max(0.0, time.time() - job.sent_at)
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
        self.jobs.labels(job.queue, job.job_type, str(outcome)).inc()
        if isinstance(exception, JobLimited):
            self.limited.labels(exception.limit).inc()
        self.duration.labels(job.queue, job.job_type).observe(duration_ms / 1000)

    def receive_failed(self, queue: str, error: BaseException) -> None:
        self.receive_errors.labels(queue).inc()

    def schedule_fired(self, schedule: str) -> None:
        self.schedule_ticks.labels(schedule).inc()


class _Healthy(Collector):
    """``sqs_jobs_healthy``: 1 while ``/healthz`` would answer 200, else 0."""

    def __init__(self, healthy: cabc.Callable[[], bool]) -> None:
        self._healthy = healthy

    def collect(self) -> t.Iterable[prometheus_client.Metric]:
        yield GaugeMetricFamily(
            "sqs_jobs_healthy",
            "1 while /healthz would answer 200, else 0.",
            value=1 if self._healthy() else 0,
        )


class _WorkerCounts(Collector):
    """Messages that never reached a handler, from the worker's own counts."""

    def __init__(self, counts: cabc.Callable[[], WorkerCounts | None]) -> None:
        self._counts = counts

    def collect(self) -> t.Iterable[prometheus_client.Metric]:
        counts = self._counts()
        malformed = CounterMetricFamily(
            "sqs_jobs_malformed",
            "Received messages that are not valid jobs, by reason.",
            labels=["queue", "reason"],
        )
        for (queue, reason), count in sorted(
            counts.malformed_counts().items() if counts else ()
        ):
            malformed.add_metric([queue, reason], count)
        yield malformed
        unknown = CounterMetricFamily(
            "sqs_jobs_unknown_job_type",
            "Received jobs of a type this worker has no handler for.",
            labels=["queue"],
        )
        for queue, count in sorted(
            counts.unknown_job_type_counts().items() if counts else ()
        ):
            unknown.add_metric([queue], count)
        yield unknown


class _StoreErrors(Collector):
    """``sqs_jobs_store_errors_total{part}``, read from the process-wide counts."""

    def collect(self) -> t.Iterable[prometheus_client.Metric]:
        family = CounterMetricFamily(
            "sqs_jobs_store_errors",
            "Failed job-store writes (job records, workers); the jobs went on.",
            labels=["part"],
        )
        for part, count in sorted(store_error_counts().items()):
            family.add_metric([part], count)
        yield family
