"""The end-to-end scenario's machinery: the shop's processes, clients and faults.

:class:`Shop` runs the shop (``tests/faults/shop_app.py``) under gunicorn and
three ``flask sqs-worker`` processes (the third with ``--processes 2``),
against PostgreSQL, the SQS server and moto's S3, both behind fault proxies.
:class:`Clients` create orders over HTTP and note what each answer said;
:func:`storm` draws a burst of proxy faults. What must hold afterwards is in
``tests/faults/invariants.py``.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import http.client
import json
import os
import pathlib
import random
import signal
import sys
import threading
import time
import typing as t

from tests.integration.helpers import wait_until
from tests.integration.processes import WorkerProcess
from tests.integration.servers import free_port

from .harness import FAKE_AWS_ENV
from .harness import QueuePair
from .harness import read_runs
from .harness import ROOT
from .harness import Run
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

APP = "tests.faults.shop_app:create_app"
MODES = ("commit", "rollback", "savepoint", "savepoint_rollback")


@dataclasses.dataclass
class Order:
    """One order a client asked for, and what its answer said."""

    id: str
    mode: str
    big: bool
    crash: bool
    ms: int
    #: ``committed``, ``rolled_back``, ``error`` (another answer) or
    #: ``no_answer`` (the connection closed first).
    answer: str = "no_answer"


class Shop:
    """The shop's processes; always :meth:`close` it."""

    def __init__(
        self,
        *,
        sqs: FaultProxy,
        s3: FaultProxy,
        store_url: str,
        bucket: str,
        queues: cabc.Mapping[str, QueuePair],
        workdir: pathlib.Path,
    ) -> None:
        self.record_dir = workdir / "records"
        self.record_dir.mkdir(parents=True, exist_ok=True)
        inherited = {
            k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))
        }
        self.env = {
            **inherited,
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "AWS_ENDPOINT_URL_S3": s3.endpoint,
            "SHOP_ENDPOINT": sqs.endpoint,
            "SHOP_QUEUES": json.dumps(
                {
                    name: {"name": pair.name, "retry_backoff_seconds": 1}
                    for name, pair in queues.items()
                }
            ),
            "SHOP_STORE_URL": store_url,
            "SHOP_BUCKET": bucket,
            "FAULT_APP_RECORD_DIR": str(self.record_dir),
        }
        self.port = free_port()
        self.web: WorkerProcess | None = None
        #: The single-process workers (replaced when killed), then the supervisor.
        self.workers: list[WorkerProcess] = []
        self.supervisor: WorkerProcess | None = None
        self.retired: list[WorkerProcess] = []

    def start(self) -> None:
        self.web = WorkerProcess(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--workers",
                "2",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--timeout",
                "120",
                f"{APP}()",
            ],
            env=self.env,
            cwd=ROOT,
        )
        self.workers = [self._worker(), self._worker()]
        self.supervisor = self._worker("--processes", "2")
        for worker in self.all_workers():
            worker.wait_for("worker_started", timeout=120)
        wait_until(self._web_answers, 120, lambda: "gunicorn to answer")

    def _worker(self, *args: str) -> WorkerProcess:
        command = [sys.executable, "-m", "flask", "--app", APP, "sqs-worker"]
        command += ["--concurrency", "2", "--idle-wait", "1", *args]
        return WorkerProcess(command, env=self.env, cwd=ROOT)

    def _web_answers(self) -> bool:
        assert self.web is not None
        assert self.web.returncode is None, self.web_output()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            connection.request("GET", "/")
            connection.getresponse().read()
        except OSError:
            return False
        finally:
            connection.close()
        return True

    def web_output(self) -> str:
        return self.web.output() if self.web is not None else ""

    def all_workers(self) -> list[WorkerProcess]:
        return [*self.workers, *([self.supervisor] if self.supervisor else [])]

    def check(self) -> None:
        """Fail (with the output) when a process that must live has exited."""
        for process in [*self.all_workers(), *([self.web] if self.web else [])]:
            status = process.returncode
            assert status is None, (
                f"{process.args[2]} {process.pid} exited with {status}; output:\n"
                f"{process.output()[-20000:]}"
            )

    # -- the worker processes that run jobs --

    def job_processes(self) -> dict[int, WorkerProcess | None]:
        """pid -> the single worker, or None for a child of the supervisor."""
        found: dict[int, WorkerProcess | None] = {w.pid: w for w in self.workers}
        if self.supervisor is not None:
            found.update(dict.fromkeys(children_of(self.supervisor.pid)))
        return found

    def busy(self, pid: int) -> bool:
        """Whether the process ``pid`` has a handler running (started, not done)."""
        path = self.record_dir / f"runs-{pid}.jsonl"
        if not path.exists():
            return False
        running: set[str] = set()
        for line in path.read_text().splitlines():
            if line.endswith("}"):
                event = json.loads(line)
                (running.add if event["ev"] == "start" else running.discard)(
                    event["mid"]
                )
        return bool(running)

    def kill_mid_job(self, rng: random.Random) -> int | None:
        """SIGKILL a worker process with a handler running; its pid, or None.

        A single worker is replaced at once; the supervisor replaces its child.
        """
        processes = self.job_processes()
        busy = [pid for pid in processes if self.busy(pid)]
        if not busy:
            return None
        pid = rng.choice(sorted(busy))
        worker = processes[pid]
        os.kill(pid, signal.SIGKILL)
        if worker is not None:
            self.workers.remove(worker)
            worker.wait(30)
            self.retired.append(worker)
            self.workers.append(self._worker())
        return pid

    def stop(self) -> list[int]:
        """SIGTERM the workers and gunicorn; return the workers' exit statuses."""
        workers = self.all_workers()
        for process in [*workers, *([self.web] if self.web else [])]:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        statuses = [worker.wait(90) for worker in workers]
        if self.web is not None:
            self.web.wait(60)
        return statuses

    def close(self) -> None:
        for process in [*self.all_workers(), *self.retired, self.web]:
            if process is not None:
                process.close()

    def runs(self) -> list[Run]:
        return read_runs(self.record_dir)

    def runs_started(self) -> int:
        return sum(1 for run in self.runs() if run.ev == "start")


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s living children (read from ``/proc``)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


class Clients:
    """Threads that create orders over HTTP until :meth:`stop`."""

    def __init__(self, port: int, count: int, seed: int) -> None:
        self.port = port
        self.orders: list[Order] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(n, seed + n), daemon=True)
            for n in range(count)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), "a client is stuck on a request"

    def _run(self, client: int, seed: int) -> None:
        rng = random.Random(seed)
        n = 0
        while not self._stop.is_set():
            mode = rng.choices(MODES, weights=(50, 20, 15, 15))[0]
            order = Order(
                id=f"o{client}-{n:05d}",
                mode=mode,
                big=rng.random() < 0.15,
                crash=mode != "rollback" and rng.random() < 0.06,
                ms=rng.randint(50, 600),
            )
            n += 1
            order.answer = self._post(order)
            with self._lock:
                self.orders.append(order)
            self._stop.wait(rng.uniform(0.05, 0.3))  # pacing, not synchronisation

    def _post(self, order: Order) -> str:
        body = json.dumps(dataclasses.asdict(order) | {"answer": None})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=90)
        try:
            connection.request(
                "POST", "/orders", body, {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            answer = json.loads(response.read() or b"{}")
        except (OSError, http.client.HTTPException):
            return "no_answer"
        except ValueError:
            return "error"
        finally:
            connection.close()
        if response.status == 201 and answer.get("committed") is True:
            return "committed"
        if response.status == 200 and answer.get("committed") is False:
            return "rolled_back"
        return "error"


#: The faults of a storm, and their chance on each request while it lasts.
SQS_STORMS: tuple[tuple[Fault, float], ...] = (
    (Fault.RESET, 0.2),
    (Fault.THROTTLE, 0.4),
    (Fault.REQUEST_THROTTLED, 0.3),
    (Fault.HTTP_500, 0.2),
    (Fault.DROP_RESPONSE, 0.1),
    (Fault.DELAY, 0.5),
    (Fault.SLOW_RESPONSE, 0.5),
)
#: S3 answers a throttled request with 503 (``SlowDown``).
S3_STORMS: tuple[tuple[Fault, float], ...] = (
    (Fault.RESET, 0.3),
    (Fault.HTTP_503, 0.4),
    (Fault.DELAY, 0.5),
    (Fault.SLOW_RESPONSE, 0.5),
)


def storm(rng: random.Random, proxy: FaultProxy, *, s3: bool) -> Rule:
    """Add one rule of a random fault to ``proxy``; the caller removes it."""
    fault, probability = rng.choice(S3_STORMS if s3 else SQS_STORMS)
    return proxy.add(Rule(fault, probability=probability, delay=(0.2, 1.5)))


def injected(proxies: cabc.Mapping[str, FaultProxy]) -> dict[str, dict[str, int]]:
    """Faults injected so far, per proxy and kind."""
    return {name: dict(proxy.injected()) for name, proxy in proxies.items()}


def monotonic_deadline(seconds: float) -> cabc.Callable[[], bool]:
    """A function telling whether ``seconds`` have passed since this call."""
    end = time.monotonic() + seconds
    return lambda: time.monotonic() > end


def as_row(value: t.Any) -> str:
    return json.dumps(value, sort_keys=True)
