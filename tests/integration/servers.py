"""Local SQS-compatible servers for the integration tier, started on free ports.

The integration tier runs against ``moto_server`` by default. Setting
``SQS_TEST_ENDPOINT`` (for example to a LocalStack or MiniStack endpoint) runs
the same tests against that server instead.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

#: Environment variable naming an already running SQS endpoint to test against.
ENDPOINT_VARIABLE = "SQS_TEST_ENDPOINT"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def refusing_endpoint() -> cabc.Iterator[str]:
    """Yield an endpoint URL on which every connection is refused.

    The port stays bound (never listening) until the block ends, so no other
    server can take it meanwhile.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether an HTTP server answers at ``url`` (any status counts)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError as exc:
        exc.close()
        return True
    except OSError:
        return False


def wait_until_answers(
    url: str, process: subprocess.Popen[bytes] | None, timeout: float
) -> None:
    """Poll ``url`` until it answers; fail early when ``process`` exits.

    :raises RuntimeError: the server exited or did not answer in time.
    """
    deadline = time.monotonic() + timeout
    while not answers(url):
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no answer from {url} within {timeout} s")
        time.sleep(0.05)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate ``process`` (kill it if it lingers) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


@contextlib.contextmanager
def moto_server(
    log_path: pathlib.Path, *, ready_within: float = 30.0, attempts: int = 3
) -> cabc.Iterator[str]:
    """Run ``moto_server`` on a free 127.0.0.1 port; yield its endpoint URL.

    The server is always terminated on the way out. Its request log goes to
    ``log_path`` (a pipe nobody reads would fill up and stall the server).
    """
    for attempt in range(1, attempts + 1):
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    str(port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            try:
                wait_until_answers(f"{endpoint}/moto-api/", process, ready_within)
            except RuntimeError:
                # Another process may have taken the free port first: try again.
                if attempt == attempts:
                    raise
                continue
            yield endpoint
            return
        finally:
            stop_process(process)


@contextlib.contextmanager
def sqs_server(log_path: pathlib.Path) -> cabc.Iterator[str]:
    """Yield the endpoint of the server under test.

    ``SQS_TEST_ENDPOINT`` when set (the caller runs that server), otherwise a
    ``moto_server`` started here and stopped afterwards.
    """
    endpoint = os.environ.get(ENDPOINT_VARIABLE)
    if endpoint:
        wait_until_answers(endpoint, None, 30.0)
        yield endpoint.rstrip("/")
        return
    with moto_server(log_path) as started:
        yield started
