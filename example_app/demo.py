"""``make demo``: the example app end to end, with no AWS account.

Starts a local SQS server, the web app and a worker (each a real process, as
in production), with a SQLite job store in a temporary directory (``flask
sqs-jobs store init``), signs two users up and places a declined order over
HTTP, then follows the worker's log until every job has finished: the welcome
emails fail once and are retried, the reports succeed, the declined charge
is dropped. A sign-up writes the user and its jobs in one transaction (the
transactional outbox), which must be empty at the end. Each job's log lines
carry the request id of the web request that enqueued it. Finally the worker
is stopped with SIGTERM and must exit 0.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import pathlib
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
import urllib.error
import urllib.parse
import urllib.request

DEADLINE_SECONDS = 90


class DemoFailed(Exception):
    pass


class Process:
    """A child process whose output lines are collected by a thread."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.lines: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(
        self, predicate: cabc.Callable[[str], bool], deadline: float
    ) -> str:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DemoFailed(f"{self.name}: timed out waiting for its output")
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise DemoFailed(
                        f"{self.name} exited early with status {self.proc.returncode}"
                    ) from None
                continue
            if predicate(line):
                return line

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flask(*args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "example_app", *args]


def wait_for_http(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise DemoFailed(f"nothing answered at {url}")


def post(url: str, form: dict[str, str], request_id: str | None = None) -> str:
    """POST a form; return the request id the app answered with."""
    headers = {"X-Request-ID": request_id} if request_id else {}
    data = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        answered = response.headers["X-Request-ID"]
        print(
            f"demo   | POST {url.rsplit('/', 1)[-1]} {form} -> {response.status}, "
            f"X-Request-ID: {answered}"
        )
        return str(answered)


def show(line: str) -> dict[str, t.Any] | None:
    """Print a worker log line compactly; return it parsed if it is JSON."""
    try:
        event = json.loads(line)
    except ValueError:
        print(f"worker | {line}")
        return None
    keys = ("job_type", "outcome", "receive_count", "request_id", "error_type")
    details = " ".join(f"{k}={event[k]}" for k in keys if k in event)
    print(f"worker | {event.get('level', ''):7} {event.get('event')} {details}")
    return t.cast(dict[str, t.Any], event)


def run_command(env: dict[str, str], *args: str) -> str:
    """Run ``flask --app example_app ARGS``; return its output."""
    result = subprocess.run(
        flask(*args), env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise DemoFailed(f"{' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


def run() -> None:
    with tempfile.TemporaryDirectory(prefix="sqs-jobs-demo-") as directory:
        run_in(pathlib.Path(directory))


def run_in(directory: pathlib.Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    sqs_port, web_port = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{sqs_port}"
    env = {
        **os.environ,
        "FLASK_SQS_JOBS_ENDPOINT_URL": json.dumps(endpoint),
        "FLASK_SQS_JOBS_STORE_URL": json.dumps(f"sqlite:///{directory / 'demo.db'}"),
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONUNBUFFERED": "1",
    }
    processes: list[Process] = []
    run_command(env, "sqs-jobs", "store", "init")
    print(f"demo   | job store ready in {directory / 'demo.db'}")
    try:
        server = Process(
            "local SQS server",
            flask("sqs-jobs", "local-server", "--port", str(sqs_port)),
            env,
        )
        processes.append(server)
        server.wait_for_line(lambda line: line.startswith("reports:"), deadline)
        print(f"demo   | local SQS server and queues ready at {endpoint}")

        worker = Process(
            "worker", flask("sqs-worker", "--concurrency", "2", "--idle-wait", "2"), env
        )
        processes.append(worker)
        worker.wait_for_line(lambda line: '"worker_started"' in line, deadline)

        web = Process("web app", flask("run", "--port", str(web_port)), env)
        processes.append(web)
        base = f"http://127.0.0.1:{web_port}"
        wait_for_http(base + "/", deadline)

        expected: dict[str, list[tuple[str, str]]] = {}
        for email, request_id in (
            ("ada@example.com", "demo-signup-ada"),
            ("grace@example.com", None),
        ):
            rid = post(base + "/signup", {"email": email}, request_id)
            expected[rid] = [
                ("send_welcome_email", "retry"),
                ("send_welcome_email", "success"),
                ("build_signup_report", "success"),
            ]
        rid = post(base + "/orders", {"card": "declined"}, "demo-order-1")
        expected[rid] = [("charge_card", "delete")]

        seen: dict[str, list[tuple[str, str]]] = {rid: [] for rid in expected}
        while any(sorted(seen[r]) != sorted(expected[r]) for r in expected):
            line = worker.wait_for_line(lambda line: True, deadline)
            event = show(line)
            if event and event.get("event") == "job_finished":
                job_request_id = str(event.get("request_id"))
                if job_request_id not in seen:
                    raise DemoFailed(f"job without a known request id: {line}")
                seen[job_request_id].append((event["job_type"], event["outcome"]))

        status = json.loads(run_command(env, "sqs-jobs", "outbox", "status", "--json"))
        print(f"demo   | outbox: {status['pending']} job(s) pending")
        if status["pending"]:
            raise DemoFailed(f"the outbox still holds jobs: {status}")
        print("demo   | every job finished; stopping the worker with SIGTERM")
        worker.proc.send_signal(signal.SIGTERM)
        worker.wait_for_line(lambda line: '"worker_stopped"' in line, deadline)
        code = worker.proc.wait(max(1.0, deadline - time.monotonic()))
        if code != 0:
            raise DemoFailed(f"the worker exited with status {code}, expected 0")
        print("demo   | worker exited 0")
    finally:
        for process in reversed(processes):
            process.stop()
    print(
        "demo passed: jobs went through the outbox, ran in the worker, were"
        " retried, dropped and correlated with their web requests"
    )


def main() -> int:
    try:
        run()
    except DemoFailed as exc:
        print(f"demo FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
