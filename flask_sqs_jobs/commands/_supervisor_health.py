"""The supervisor's one health port, covering every worker process.

Each worker process serves its own ``/status`` and ``/metrics`` on an
ephemeral 127.0.0.1 port and reports the port to the supervisor (see
:mod:`._supervisor`). Here the supervisor polls every ``/status`` in the
background, so that its ``/healthz`` answers at once from what it last saw,
even while a worker process hangs; ``/metrics`` fetches every process's text
with a short timeout and merges them, labelling each sample with
``process="<index>"`` so that every series stays unique. The port is served by
the worker's own probe server (:mod:`.engine._probe_http`), with the same
limits; ``/metrics`` runs off its loop, as it waits on the processes.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import http.client
import json
import socket
import threading
import time
import typing as t

from ..engine.ops import ProbeServer
from ..engine.ops import Reply

#: ``/healthz`` fails for a worker process whose ``/status`` did not answer
#: for this long (a hung or stopped process).
STALE_AFTER_SECONDS = 3.0
_POLL_INTERVAL = 0.5
_STATUS_TIMEOUT = 1.0
_METRICS_TIMEOUT = 2.0
_NO_METRICS = (
    b'metrics need the "metrics" extra: pip install "flask-sqs-jobs[metrics]"\n'
)


@dataclasses.dataclass
class Child:
    """What the supervisor knows of one worker process (guarded by a lock)."""

    index: int
    pid: int | None = None
    #: The supervisor's end of the socket pair shared with the process.
    channel: socket.socket | None = None
    received: bytes = b""
    #: The port of the process's health server; -1 when it never said.
    port: int | None = None
    started_at: float = 0.0
    restarts: int = 0
    restart_at: float | None = None
    status: dict[str, t.Any] | None = None
    answered_at: float = 0.0


class SupervisorHealth:
    """Serve ``/healthz``, ``/status`` and ``/metrics`` for all ``children``.

    :param lock: guards ``children``, shared with the supervisor.
    """

    def __init__(
        self, children: list[Child], lock: threading.Lock, host: str, port: int
    ) -> None:
        self._children = children
        self._lock = lock
        self._done = threading.Event()
        self._server = ProbeServer(
            host, port, self._answer, offload={"/metrics"}, name="sqs-jobs-health"
        )

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self._server.port

    def start(self) -> None:
        self._server.start()
        for child in self._children:
            threading.Thread(target=self._poll, args=(child,), daemon=True).start()

    def stop(self) -> None:
        self._done.set()
        self._server.stop()

    def close_in_child(self) -> None:
        """In a forked worker process: let go of the inherited sockets."""
        self._server.close_in_child()

    def _answer(self, path: str) -> Reply:
        if path in ("/healthz", "/status"):
            status = self.status()
            code = 200 if status["healthy"] else 503
            if path == "/healthz":
                return Reply(code, status["reason"].encode())
            body = json.dumps(status, indent=2).encode()
            return Reply(code, body, "application/json")
        if path == "/metrics":
            return Reply(*self.metrics())
        return Reply(404, b"not found\n")

    def _poll(self, child: Child) -> None:
        # Threads here never log: a fork while one held the logger's lock
        # would leave that lock held forever in the new process.
        while not self._done.wait(_POLL_INTERVAL):
            with self._lock:
                pid, port = child.pid, child.port
            if pid is None or port is None or port < 0:
                continue
            answer = _get(port, "/status", _STATUS_TIMEOUT)
            if answer is None:
                continue
            with contextlib.suppress(ValueError), self._lock:
                if child.pid == pid:
                    child.status = dict(json.loads(answer[1]))
                    child.answered_at = time.monotonic()

    def status(self) -> dict[str, t.Any]:
        """The health verdict of every process, for ``/status`` and ``/healthz``."""
        now = time.monotonic()
        entries, problems = [], []
        with self._lock:
            for child in self._children:
                reason = None
                if child.pid is None:
                    restarting = child.restart_at is not None
                    reason = "is being restarted" if restarting else "has exited"
                elif child.status is None:
                    reason = "is starting"
                elif now - child.answered_at > STALE_AFTER_SECONDS:
                    silent = now - child.answered_at
                    reason = f"has not answered its health check for {silent:.0f} s"
                elif not child.status.get("healthy"):
                    reason = str(child.status.get("reason"))
                entries.append(
                    {
                        **(child.status or {}),
                        "process": child.index,
                        "pid": child.pid,
                        "healthy": reason is None,
                        "reason": reason or "ok",
                    }
                )
                if reason is not None:
                    problems.append(
                        f"process {child.index} (pid {child.pid}): {reason}"
                    )
        return {
            "healthy": not problems,
            "reason": "; ".join(problems) or "ok",
            "processes": entries,
        }

    def metrics(self) -> tuple[int, bytes, str]:
        """Every process's ``/metrics``, merged: ``(status, body, content type)``.

        A process that does not answer within 2 s is left out of this scrape.
        """
        try:
            import prometheus_client
        except ImportError:
            return 404, _NO_METRICS, "text/plain"
        with self._lock:
            ports = {c.index: c.port for c in self._children if c.port and c.port > 0}
        texts: dict[int, str] = {}

        def fetch(index: int, port: int) -> None:
            answer = _get(port, "/metrics", _METRICS_TIMEOUT)
            if answer is not None and answer[0] == 200:
                texts[index] = answer[1].decode()

        threads = [threading.Thread(target=fetch, args=item) for item in ports.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return 200, merge_metrics(texts), prometheus_client.CONTENT_TYPE_LATEST


def merge_metrics(texts: cabc.Mapping[int, str]) -> bytes:
    """Merge the Prometheus texts of processes (by index) into one, labelling
    each sample with ``process="<index>"``."""
    from prometheus_client import CollectorRegistry
    from prometheus_client import generate_latest
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import Collector

    families: dict[str, Metric] = {}
    for index, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type)
            )
            merged.samples.extend(
                sample._replace(labels={**sample.labels, "process": str(index)})
                for sample in family.samples
            )

    class Merged(Collector):
        def collect(self) -> cabc.Iterable[Metric]:
            return list(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Merged())
    return generate_latest(registry)


def _get(port: int, path: str, timeout: float) -> tuple[int, bytes] | None:
    """GET a worker process's health endpoint (never through a proxy)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()
