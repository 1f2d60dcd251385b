"""Virtualenvs under .bench/: the runner's, the server's, each peer's, the project's.

Stdlib only: this module runs before anything else is installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / ".bench"
WORKERS_DIR = Path(__file__).resolve().parent / "workers"
LAUNCHER_ENV = "BENCH_LAUNCHER_PYTHON"
PIP_TIMEOUT = 900


def venv_python(name: str) -> Path:
    return BENCH_DIR / name / "bin" / "python"


def ensure_venv(
    name: str, requirements: list[str], *, editable: Path | None = None
) -> Path:
    """Create .bench/NAME with REQUIREMENTS installed once; return its python.

    A marker file remembers what was installed, so later runs skip pip unless the
    requirement list (or the editable project's pyproject.toml) changed.
    """
    python = venv_python(name)
    stamp = " ".join(requirements)
    if editable is not None:
        pyproject = (editable / "pyproject.toml").read_bytes()
        stamp += " -e " + hashlib.sha256(pyproject).hexdigest()
    marker = BENCH_DIR / name / ".bench-installed"
    if python.exists() and marker.exists() and marker.read_text() == stamp:
        return python
    BENCH_DIR.mkdir(exist_ok=True)
    log(f"setting up .bench/{name} ({' '.join(requirements) or editable})")
    if not python.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", str(BENCH_DIR / name)], check=True
        )
    args = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        *requirements,
    ]
    if editable is not None:
        args += ["-e", str(editable)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=PIP_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"pip install failed in .bench/{name}: {tail(done.stderr)}")
    marker.write_text(stamp)
    return python


def ensure_runner() -> None:
    """Re-run ``python -m bench`` inside .bench/venv-runner when boto3 is missing."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        if os.environ.get(LAUNCHER_ENV):
            raise SystemExit(
                "bench: boto3 is still missing inside .bench/venv-runner"
            ) from None
        python = ensure_venv("venv-runner", ["boto3"])
        env = {**os.environ, LAUNCHER_ENV: sys.executable}
        os.chdir(REPO)
        os.execve(str(python), [str(python), "-m", "bench", *sys.argv[1:]], env)


def launcher_python() -> str:
    """The interpreter the user started ``python -m bench`` with."""
    return os.environ.get(LAUNCHER_ENV) or sys.executable


def dist_versions(python: Path | str, dists: list[str]) -> dict[str, str]:
    """Installed versions of DISTS as seen by PYTHON (missing ones are left out)."""
    code = (
        "import json, sys\n"
        "from importlib import metadata\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        found[name] = metadata.version(name)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run(
        [str(python), "-c", code, *dists], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        return {}
    return dict(json.loads(done.stdout))


def python_version(python: Path | str) -> str:
    done = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip()


@dataclass(frozen=True)
class ProjectPython:
    """The interpreter that imports flask_sqs_jobs, or why there is none."""

    python: str | None
    error: str | None


PROJECT_CHECK = (
    "from flask_sqs_jobs import JobWorker, QueueGroup, SQSJobs;"
    " import structlog, boto3, orjson"
)
#: Installed beside the project: production logging serializes with orjson, as
#: structlog's performance notes recommend (about a third less time per line).
PROJECT_EXTRAS = ["orjson"]


def project_python() -> ProjectPython:
    """The launcher's python if it imports flask_sqs_jobs and orjson, else
    .bench/venv-project (the project and orjson)."""
    first = check_import(launcher_python())
    if first is None:
        return ProjectPython(launcher_python(), None)
    try:
        python = str(ensure_venv("venv-project", PROJECT_EXTRAS, editable=REPO))
    except (RuntimeError, subprocess.SubprocessError) as exc:
        return ProjectPython(None, f"{first}; .bench/venv-project: {exc}")
    second = check_import(python)
    if second is None:
        return ProjectPython(python, None)
    return ProjectPython(None, second)


def check_import(python: str) -> str | None:
    """None when PYTHON imports the engine from the work tree, else the error."""
    done = subprocess.run(
        [python, "-c", PROJECT_CHECK],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=project_env(),
        timeout=120,
    )
    return None if done.returncode == 0 else tail(done.stderr, lines=1)


def project_env() -> dict[str, str]:
    """Environment that puts the work tree's flask_sqs_jobs first on sys.path."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def tail(text: str, *, lines: int = 5) -> str:
    return (
        " | ".join(line for line in text.strip().splitlines()[-lines:]) or "(no output)"
    )


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
