"""Each integration imports its SDK only in its own module, behind its own extra."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import typing as t

import flask_sqs_jobs
import pytest
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.contrib.newrelic import NewRelicMiddleware
from flask_sqs_jobs.contrib.otel import OTelMiddleware
from flask_sqs_jobs.contrib.sentry import SentryMiddleware

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

PACKAGE = pathlib.Path(flask_sqs_jobs.__file__).parent
#: Top-level module of each optional SDK -> the extra that installs it.
SDKS = {"sentry_sdk": "sentry", "opentelemetry": "otel", "newrelic": "newrelic"}
#: (contrib module, the SDK it imports)
MODULES = [
    ("sentry", "sentry_sdk"),
    ("otel", "opentelemetry"),
    ("newrelic", "newrelic"),
]


def import_without(sdks: list[str], module: str) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter where ``sdks`` cannot be imported."""
    code = (
        "import sys\n"
        f"for name in {sdks!r}:\n"
        "    sys.modules[name] = None\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "    raise SystemExit(3)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("module", "sdk"), MODULES)
def test_a_missing_sdk_names_the_extra_to_install(module: str, sdk: str) -> None:
    result = import_without([sdk], f"flask_sqs_jobs.contrib.{module}")

    assert result.returncode == 3, result.stderr
    assert f'pip install "flask-sqs-jobs[{SDKS[sdk]}]"' in result.stdout
    assert f"flask_sqs_jobs.contrib.{module}" in result.stdout


def test_a_sentry_sdk_of_another_major_version_is_named_with_the_one_to_install() -> (
    None
):
    code = (
        "import sentry_sdk\n"
        "sentry_sdk.VERSION = '3.0.1'\n"
        "try:\n"
        "    import flask_sqs_jobs.contrib.sentry\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "    raise SystemExit(3)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 3, result.stderr
    assert "needs sentry-sdk 2.x (2.15 or later); 3.0.1 is installed" in result.stdout
    assert '"sentry-sdk>=2.15,<3"' in result.stdout


def test_the_package_and_the_ecs_integration_need_no_optional_sdk() -> None:
    result = import_without(
        list(SDKS),
        "flask_sqs_jobs, flask_sqs_jobs.cli, flask_sqs_jobs.testing,"
        " flask_sqs_jobs.contrib, flask_sqs_jobs.contrib.ecs",
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_only_the_contrib_modules_import_an_optional_sdk() -> None:
    owners = {sdk: f"contrib/{module}.py" for module, sdk in MODULES}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                owner = owners.get(name.partition(".")[0])
                if owner is not None and relative != owner:
                    offenders.append(f"{relative} imports {name}")

    assert offenders == []


@pytest.mark.parametrize(
    "pair",
    [
        (SentryMiddleware(), OTelMiddleware()),
        (OTelMiddleware(), NewRelicMiddleware()),
        (NewRelicMiddleware(), SentryMiddleware()),
    ],
    ids=["sentry+otel", "otel+newrelic", "newrelic+sentry"],
)
def test_two_tracing_integrations_refuse_to_enqueue(
    sqs: SQSClient, pair: tuple[t.Any, t.Any]
) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(url, boto_client=sqs)}}, middleware=pair
    )

    with pytest.raises(ValueError, match="only one trace-injecting middleware"):
        group.enqueue("jobs", "ping", {})
