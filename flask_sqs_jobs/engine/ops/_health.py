"""The worker's health and metrics endpoint: ``/healthz``, ``/status``, ``/metrics``.

``flask sqs-worker --health-port PORT`` serves it. A worker is healthy while
its polling loop keeps completing receives (empty or not) or is busy on a job,
so a long job never fails the check and a worker stuck failing its receives
does. ``/status`` adds the details as JSON, including queues that keep
failing while the others are served, with each error's class and AWS error
code but never its message (which may name the account).

The server (:mod:`._probe_http`) bounds what any client can hold: its
connections, the time to send a request and to read the answer, the size of a
request. No client can starve the probe or take the file descriptors the
worker needs for its SQS calls.
"""

from __future__ import annotations

import json
import re
import time
import typing as t

import structlog

from ..model import is_finite_number
from ..worker import JobWorker
from ._probe_http import ProbeServer
from ._probe_http import Reply

if t.TYPE_CHECKING:
    from ._metrics import PrometheusMetrics

log = structlog.get_logger(__name__)


class HealthServer:
    """Serve ``GET /healthz`` and ``GET /metrics`` for a :class:`JobWorker`.

    :param worker: the worker to report on.
    :param host: the address to listen on (``0.0.0.0`` for a probe from
        outside the container's network namespace, e.g. Kubernetes; for
        in-cluster probes only, never exposed publicly).
    :param port: the port; 0 picks a free one (see :attr:`port`).
    :param max_age: seconds without a completed receive, while no job runs,
        after which ``/healthz`` answers 503.
    :param metrics: the Prometheus metrics to serve on ``/metrics``; without
        them ``/metrics`` answers 404 with a hint.
    """

    def __init__(
        self,
        worker: JobWorker,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_age: float = 60.0,
        metrics: PrometheusMetrics | None = None,
    ) -> None:
        self.worker = worker
        if not is_finite_number(max_age) or max_age <= 0:
            raise ValueError(
                f"max_age must be a positive, finite number of seconds; got {max_age!r}"
            )
        self.max_age = max_age
        self.metrics = metrics
        self._started = time.monotonic()
        if metrics is not None:
            metrics.bind_health(lambda: self.check()[0])
        self._server = ProbeServer(host, port, self._answer, name="sqs-jobs-health")

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self._server.port

    def start(self) -> None:
        self._server.start()
        log.info("health_server_started", port=self.port)

    def stop(self) -> None:
        self._server.stop()

    def check(self) -> tuple[bool, str]:
        """Return ``(healthy, reason)`` per the rule above."""
        if self.worker.busy_slots:
            return True, "ok"
        age = self.worker.last_receive_age
        if age is None:
            age = time.monotonic() - self._started
        if age > self.max_age:
            return (
                False,
                f"no receive completed for {age:.0f} s (limit {self.max_age:g} s)",
            )
        return True, "ok"

    def status(self) -> dict[str, t.Any]:
        """The health verdict with its details, for ``/status``."""
        healthy, reason = self.check()
        worker = self.worker
        failures = worker.queue_failures()
        errors = worker.queue_errors()
        stats = worker.stats()
        age = stats["last_receive_age"]
        return {
            "healthy": healthy,
            "reason": reason,
            "busy_slots": stats["busy_slots"],
            "last_receive_age_seconds": None if age is None else round(age, 3),
            "outcomes": stats["outcomes"],
            "queues": {
                name: {
                    "consecutive_receive_failures": count,
                    "last_error": public_error(errors.get(name)),
                }
                for name, count in failures.items()
            },
        }

    def _answer(self, path: str) -> Reply:
        if path == "/healthz":
            healthy, reason = self.check()
            return Reply(200 if healthy else 503, reason.encode())
        if path == "/status":
            status = self.status()
            body = json.dumps(status, indent=2).encode()
            return Reply(200 if status["healthy"] else 503, body, "application/json")
        if path == "/metrics" and self.metrics is not None:
            body, content_type = self.metrics.render()
            return Reply(200, body, content_type)
        if path == "/metrics":
            return Reply(404, _NO_METRICS)
        return Reply(404, b"not found\n")


def public_error(error: str | None) -> str | None:
    """``error`` (``"<class>: <message>"``) without its message, which may name
    the account (an AccessDenied names the caller's ARN): the class and, for
    an answer from AWS, its error code, e.g. ``"ClientError: AccessDenied"``.
    """
    if error is None:
        return None
    kind, _, message = error.partition(": ")
    if not kind.isidentifier():
        return "Error"
    code = _AWS_ERROR_CODE.match(message)
    return f"{kind}: {code.group(1)}" if code else kind


_AWS_ERROR_CODE = re.compile(r"An error occurred \(([A-Za-z0-9._-]{1,100})\)")
_NO_METRICS = (
    b'metrics need the "metrics" extra: pip install "flask-sqs-jobs[metrics]"\n'
)
