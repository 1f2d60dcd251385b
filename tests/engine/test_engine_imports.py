"""The engine is usable without Flask: importing it never imports Flask."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "statement",
    [
        "import flask_sqs_jobs.engine",
        "from flask_sqs_jobs import QueueGroup, JobWorker, SqsQueue",
        "from flask_sqs_jobs import current_job, Job, JobMiddleware, RetryJob",
        "from flask_sqs_jobs import NonRetryableError, EnqueueBatchError, signals",
    ],
)
def test_the_engine_imports_where_flask_cannot_be_imported(statement: str) -> None:
    result = run_python(
        f"""
        import sys
        sys.modules["flask"] = None  # any import of flask now fails
        {statement}
        loaded = [m for m in sys.modules if m.split(".")[0] == "flask"]
        assert loaded == ["flask"], loaded
        """
    )

    assert result.returncode == 0, result.stderr


def test_importing_the_engine_leaves_flask_unimported() -> None:
    result = run_python(
        """
        import sys
        import flask_sqs_jobs.engine
        from flask_sqs_jobs import QueueGroup, JobWorker, SqsQueue
        web = {"flask", "werkzeug"}
        print(sorted(m for m in sys.modules if m.split(".")[0] in web))
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_importing_the_package_does_not_configure_structlog() -> None:
    result = run_python(
        """
        import structlog
        import flask_sqs_jobs
        import flask_sqs_jobs.engine
        print(structlog.is_configured())
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
