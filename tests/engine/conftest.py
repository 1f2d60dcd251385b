from __future__ import annotations

import collections.abc as cabc
import random
import typing as t

import pytest
import structlog
import structlog.testing

from tests.log_capture import capture_logs
from tests.support import create_queue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict


@pytest.fixture
def queue_url(sqs: SQSClient) -> str:
    """A standard queue named ``jobs``."""
    return create_queue(sqs, "jobs")


@pytest.fixture
def logs() -> cabc.Iterator[list[EventDict]]:
    """Captured structlog events as an application would see them.

    Each entry carries the bound context (``merge_contextvars``) and the name of
    the logger that emitted it (``logger``).
    """
    factory = structlog.get_config()["logger_factory"]
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    try:
        with capture_logs(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_logger_name,
            ]
        ) as entries:
            yield entries
    finally:
        structlog.configure(logger_factory=factory)


@pytest.fixture
def seeded_random() -> cabc.Iterator[None]:
    """Seed the global ``random`` so draws are reproducible, then restore it."""
    state = random.getstate()
    random.seed(20240607)
    try:
        yield
    finally:
        random.setstate(state)
