from __future__ import annotations

import collections.abc as cabc
import typing as t

import boto3
import pytest
import structlog
from moto import mock_aws

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials, so no test can reach a real AWS account."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture(autouse=True)
def _clear_log_context() -> cabc.Iterator[None]:
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def sqs() -> cabc.Iterator[SQSClient]:
    """A boto3 SQS client talking to moto's in-process mock."""
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)
