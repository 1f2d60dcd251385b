"""The fault-injection tier: real SQS server, real ``flask sqs-worker``, a proxy.

Off by default: ``make test`` collects these tests and skips them. Set
``SQS_JOBS_FAULTS=short`` (what ``make faults-short`` and CI run) or
``SQS_JOBS_FAULTS=full`` (``make faults``) to run them; each test carries the
``faults`` marker. See docs/reliability.md.

The server is MiniStack from ``.venv-ministack`` (``make faults`` creates it),
else ``moto_server``; ``SQS_JOBS_FAULTS_SERVER=moto`` forces moto.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import pathlib
import typing as t

import pytest

from .harness import Harness
from .harness import HERE
from .harness import mode
from .harness import MODE_VARIABLE
from .harness import sqs_server
from .harness import SqsServer
from .proxy import FaultProxy

#: Where the scenarios' figures are also written as JSON, when set.
REPORT_VARIABLE = "SQS_JOBS_FAULTS_REPORT"
_RESULTS = pytest.StashKey[list[dict[str, t.Any]]]()
_TABLES = pytest.StashKey[list[tuple[str, str]]]()


class Report(t.Protocol):
    def __call__(self, scenario: str, **figures: t.Any) -> None: ...


class Tables(t.Protocol):
    def __call__(self, title: str, text: str) -> None: ...


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    skip = pytest.mark.skip(
        reason=f"fault tier: set {MODE_VARIABLE}=short or =full (make faults-short,"
        " make faults)"
    )
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.faults)
            if not mode():
                item.add_marker(skip)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for title, text in config.stash.get(_TABLES, []):
        terminalreporter.section(title)
        for line in text.splitlines():
            terminalreporter.write_line(line)
    results = config.stash.get(_RESULTS, [])
    if not results:
        return
    terminalreporter.section("fault tier figures")
    for row in results:
        terminalreporter.write_line(json.dumps(row, sort_keys=True))
    path = os.environ.get(REPORT_VARIABLE)
    if path:
        pathlib.Path(path).write_text(json.dumps(results, indent=2, sort_keys=True))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Report:
    """Record a scenario's figures for the summary at the end of the run."""
    results = request.config.stash.setdefault(_RESULTS, [])

    def add(scenario: str, **figures: t.Any) -> None:
        results.append({"scenario": scenario, "mode": mode(), **figures})

    return add


@pytest.fixture
def tables(request: pytest.FixtureRequest) -> Tables:
    """Keep a text table to print at the end of the run (invariants, say)."""
    kept = request.config.stash.setdefault(_TABLES, [])

    def add(title: str, text: str) -> None:
        kept.append((title, text))

    return add


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> cabc.Iterator[SqsServer]:
    log_path = tmp_path_factory.mktemp("sqs-server") / "server.log"
    with sqs_server(log_path) as started:
        yield started


@pytest.fixture
def proxy(server: SqsServer) -> cabc.Iterator[FaultProxy]:
    """The proxy the workers talk through; it keeps a journal of every request."""
    with FaultProxy(server.endpoint, seed=20240607, journal=True) as started:
        yield started


@pytest.fixture
def harness(
    server: SqsServer, proxy: FaultProxy, tmp_path: pathlib.Path
) -> cabc.Iterator[Harness]:
    server.check()
    made = Harness(server, proxy.endpoint, tmp_path)
    try:
        yield made
    finally:
        made.close()
    server.check()
