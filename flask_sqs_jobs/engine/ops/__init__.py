"""Operations: the health and metrics server, and what operators do with queues."""

from __future__ import annotations

from ._health import HealthServer
from ._inspection import counts
from ._inspection import dead_letter_queue
from ._inspection import describe_dead_letter
from ._inspection import make_visible
from ._inspection import peek
from ._inspection import receive_batch
from ._inspection import redrive
from ._inspection import RedriveResult
from ._inspection import resend_params
from ._letter_source import other_source
from ._metrics import DURATION_BUCKETS
from ._metrics import PrometheusMetrics
from ._probe_http import ProbeServer
from ._probe_http import Reply
from ._store_errors import count_store_error

__all__ = [
    "other_source",
    "DURATION_BUCKETS",
    "HealthServer",
    "ProbeServer",
    "PrometheusMetrics",
    "Reply",
    "count_store_error",
    "counts",
    "dead_letter_queue",
    "describe_dead_letter",
    "make_visible",
    "peek",
    "receive_batch",
    "redrive",
    "RedriveResult",
    "resend_params",
]
