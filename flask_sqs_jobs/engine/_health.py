"""The worker's health and metrics endpoint: ``/healthz``, ``/status``, ``/metrics``.

``flask sqs-worker --health-port PORT`` serves it. A worker is healthy while
its polling loop keeps completing receives (empty or not) or is busy on a job,
so a long job never fails the check and a worker stuck failing its receives
does. ``/status`` adds the details as JSON, including queues that keep
failing while the others are served.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import typing as t

import structlog

from ._worker import JobWorker

if t.TYPE_CHECKING:
    from ._metrics import PrometheusMetrics

log = structlog.get_logger(__name__)


class HealthServer:
    """Serve ``GET /healthz`` and ``GET /metrics`` for a :class:`JobWorker`.

    :param worker: the worker to report on.
    :param host: the address to listen on (``0.0.0.0`` for a probe from
        outside the container's network namespace, e.g. Kubernetes).
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
        self.max_age = max_age
        self.metrics = metrics
        self._started = time.monotonic()
        self._server = http.server.ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sqs-jobs-health", daemon=True
        )

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("health_server_started", port=self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

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
        age = worker.last_receive_age
        return {
            "healthy": healthy,
            "reason": reason,
            "busy_slots": worker.busy_slots,
            "last_receive_age_seconds": None if age is None else round(age, 3),
            "queues": {
                name: {
                    "consecutive_receive_failures": count,
                    "last_error": errors.get(name),
                }
                for name, count in failures.items()
            },
        }


def _handler(server: HealthServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                healthy, reason = server.check()
                self._reply(200 if healthy else 503, reason, "text/plain")
            elif path == "/status":
                status = server.status()
                code = 200 if status["healthy"] else 503
                self._reply(code, json.dumps(status, indent=2), "application/json")
            elif path == "/metrics" and server.metrics is not None:
                body, content_type = server.metrics.render()
                self._reply(200, body, content_type)
            elif path == "/metrics":
                self._reply(
                    404,
                    'metrics need the "metrics" extra: pip install'
                    ' "flask-sqs-jobs[metrics]"\n',
                    "text/plain",
                )
            else:
                self._reply(404, "not found\n", "text/plain")

        def _reply(self, status: int, body: str | bytes, content_type: str) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: t.Any) -> None:
            pass  # probes every few seconds would drown the worker's own logs

    return Handler
