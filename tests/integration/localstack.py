"""Part of the integration tier against LocalStack, as CI runs it.

``python -m tests.integration.localstack [PYTEST ARGS]``, or ``make
integration-localstack``.

LocalStack (``localstack-core``, in host mode: no container, no image) is the
third SQS implementation the tests run against, beside moto (the unit tier and
the rest of the integration tier) and MiniStack (the fault tier). It needs
Python 3.13 (LocalStack 2026.3 imports ``warnings.deprecated``) and pins its own
botocore, so it gets a virtualenv of its own, ``.venv-localstack``, made from
``localstack-requirements.txt`` on first use.

This module finds a Python 3.13 or later (``python3.13`` and newer on the PATH,
pyenv's versions, ``/usr/bin``), installs LocalStack, starts it on a free
127.0.0.1 port with its files in a temporary folder, runs :data:`TESTS` with
``SQS_TEST_ENDPOINT`` pointing at it, stops it and exits with pytest's status.
Without such a Python it prints one line saying so and exits 0. Arguments are
passed on to pytest.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from .servers import free_port
from .servers import stop_process
from .servers import wait_until_answers

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
REQUIREMENTS = HERE / "localstack-requirements.txt"
VENV = ROOT / ".venv-localstack"
MINIMUM_PYTHON = (3, 13)
#: The part of the tier that runs against LocalStack: the engine's SQS
#: semantics (visibility and heartbeat, FIFO groups, polling, concurrency,
#: retries and dead letters, shutdown, receive failures) and the worker
#: process (signals, app contexts, health, metrics, --reload). The rest needs
#: services LocalStack is not started with (S3, DynamoDB, EventBridge
#: Scheduler) or does not depend on the SQS server (the dashboard, the store).
TESTS = [
    "test_visibility.py",
    "test_fifo.py",
    "test_polling.py",
    "test_concurrency.py",
    "test_shutdown.py",
    "test_retry_policies.py",
    "test_receive_failures.py",
    "test_operations.py",
    "test_worker_counters.py",
    "test_cli_worker.py",
    "test_reload.py",
]
#: LocalStack's settings: SQS only, on loopback, path-style queue URLs, and
#: nothing that reaches out (analytics, the certificate download).
SETTINGS = {
    "SERVICES": "sqs",
    "SQS_ENDPOINT_STRATEGY": "path",
    "DISABLE_EVENTS": "1",
    "SKIP_SSL_CERT_DOWNLOAD": "1",
    "DNS_ADDRESS": "0",
    "OVERRIDE_IN_DOCKER": "0",
}


def find_python() -> str | None:
    """The path of a Python 3.13 or later with ``venv``, or None."""
    for candidate in _candidates():
        try:
            result = subprocess.run(
                [
                    candidate,
                    "-c",
                    f"import sys, venv; print(sys.version_info >= {MINIMUM_PYTHON})",
                ],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if result.returncode == 0 and result.stdout.strip() == "True":
            return candidate
    return None


def _candidates() -> cabc.Iterator[str]:
    for minor in range(MINIMUM_PYTHON[1], MINIMUM_PYTHON[1] + 6):
        found = shutil.which(f"python3.{minor}")
        if found:
            yield found
    pyenv_root = pathlib.Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    for version in sorted((pyenv_root / "versions").glob("3.*"), reverse=True):
        yield str(version / "bin" / "python3")
    for minor in range(MINIMUM_PYTHON[1], MINIMUM_PYTHON[1] + 6):
        yield f"/usr/bin/python3.{minor}"


def install(python: str) -> pathlib.Path:
    """Make ``.venv-localstack`` with the pinned requirements, once per version
    of them; return its interpreter.

    :raises subprocess.CalledProcessError: the virtualenv or the install failed.
    """
    stamp = VENV / ".installed"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes() + python.encode()).hexdigest()
    interpreter = VENV / "bin" / "python"
    if stamp.exists() and stamp.read_text() == wanted and interpreter.exists():
        return interpreter
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(VENV)], check=True)
    pip = [str(interpreter), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "--no-deps", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(wanted)
    return interpreter


@contextlib.contextmanager
def localstack(
    interpreter: pathlib.Path, log_path: pathlib.Path, ready_within: float = 120.0
) -> cabc.Iterator[str]:
    """Run LocalStack on a free 127.0.0.1 port; yield its endpoint URL.

    Its files go to a temporary folder, removed afterwards with the server.
    """
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="localstack-") as files:
        env = {
            **os.environ,
            **SETTINGS,
            "GATEWAY_LISTEN": f"127.0.0.1:{port}",
            "LOCALSTACK_HOST": f"127.0.0.1:{port}",
            "FILESYSTEM_ROOT": files,
        }
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [str(interpreter), "-m", "localstack.runtime.main"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            health = f"{endpoint}/_localstack/health"
            wait_until_answers(health, process, ready_within)
            if not _sqs_ready(health):
                raise RuntimeError(f"LocalStack answers without SQS: see {log_path}")
            yield endpoint
        finally:
            stop_process(process)


def _sqs_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            services = json.load(response).get("services", {})
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return services.get("sqs") in ("available", "running")


def main(argv: cabc.Sequence[str]) -> int:
    python = find_python()
    if python is None:
        print(
            "LocalStack tier skipped: no Python 3.13 or later found (LocalStack 2026.3"
            " needs it; install python3.13 or a pyenv 3.13)"
        )
        return 0
    interpreter = install(python)
    log_path = ROOT / ".pytest_cache" / "localstack.log"
    log_path.parent.mkdir(exist_ok=True)
    with localstack(interpreter, log_path) as endpoint:
        print(f"LocalStack on {endpoint} (log: {log_path})", flush=True)
        command = [
            sys.executable,
            "-m",
            "pytest",
            *[str(HERE / name) for name in TESTS],
            *argv,
        ]
        env = {**os.environ, "SQS_TEST_ENDPOINT": endpoint}
        return subprocess.run(command, env=env, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
