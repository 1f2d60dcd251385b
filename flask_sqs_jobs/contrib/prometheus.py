"""Prometheus metrics for a worker (the ``metrics`` extra, prometheus-client).

``flask sqs-worker --health-port PORT`` serves them on ``/metrics`` by itself;
import :class:`PrometheusMetrics` from here to attach them to an embedded
:class:`~flask_sqs_jobs.JobWorker`::

    metrics = PrometheusMetrics()
    worker = JobWorker(queues, handlers, hooks=[metrics])
    metrics.bind(worker)

Among its series, ``sqs_jobs_schedule_ticks_total{schedule}`` counts the ticks of
periodic jobs the worker enqueued.
"""

from __future__ import annotations

from ..engine.ops import DURATION_BUCKETS
from ..engine.ops import PrometheusMetrics

__all__ = ["DURATION_BUCKETS", "PrometheusMetrics"]
