"""The fault proxy itself: each fault reaches boto3 as the error it stands for."""

from __future__ import annotations

import time
import typing as t

import pytest
from botocore.exceptions import ClientError
from botocore.exceptions import ConnectionClosedError
from botocore.exceptions import EndpointConnectionError

from tests.support import local_sqs_client

from .harness import Harness
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


@pytest.fixture
def client(proxy: FaultProxy) -> t.Iterator[SQSClient]:
    """A client through the proxy that does not retry: every fault shows."""
    made = local_sqs_client(
        proxy.endpoint, attempts=1, connect_timeout=2, read_timeout=10
    )
    yield made
    made.close()


@pytest.fixture
def url(harness: Harness) -> str:
    return harness.queue("proxy", visibility_timeout=30).url


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.HTTP_500, 500, "InternalError"),
        (Fault.HTTP_503, 503, "ServiceUnavailable"),
        (Fault.THROTTLE, 400, "ThrottlingException"),
        (Fault.REQUEST_THROTTLED, 400, "RequestThrottled"),
    ],
)
def test_error_answers_parse_as_sqs_errors(
    proxy: FaultProxy, client: SQSClient, url: str, fault: Fault, status: int, code: str
) -> None:
    with proxy.rules(Rule(fault, frozenset({"SendMessage"}), limit=1)):
        with pytest.raises(ClientError) as caught:
            client.send_message(QueueUrl=url, MessageBody="x")
        client.send_message(QueueUrl=url, MessageBody="y")
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert error["Error"]["Code"] == code
    assert proxy.injected() == {fault.value: 1}


def test_throttling_is_retried_by_botocore(
    proxy: FaultProxy, harness: Harness, url: str
) -> None:
    retrying = local_sqs_client(proxy.endpoint, attempts=3)
    try:
        with proxy.rules(Rule(Fault.THROTTLE, limit=2)):
            retrying.send_message(QueueUrl=url, MessageBody="x")
    finally:
        retrying.close()
    assert harness.counts(url) == (1, 0, 0)


def test_chosen_error_code(proxy: FaultProxy, client: SQSClient, url: str) -> None:
    rule = Rule(Fault.ERROR, code="ReceiptHandleIsInvalid", limit=1)
    with proxy.rules(rule), pytest.raises(ClientError) as caught:
        client.delete_message(QueueUrl=url, ReceiptHandle="whatever")
    assert caught.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_reset_never_reaches_the_server(
    proxy: FaultProxy, client: SQSClient, harness: Harness, url: str
) -> None:
    with (
        proxy.rules(Rule(Fault.RESET, limit=1)),
        pytest.raises((ConnectionClosedError, EndpointConnectionError)),
    ):
        client.send_message(QueueUrl=url, MessageBody="x")
    assert harness.counts(url) == (0, 0, 0)


def test_dropped_response_after_the_server_applied_the_request(
    proxy: FaultProxy, client: SQSClient, harness: Harness, url: str
) -> None:
    with (
        proxy.rules(Rule(Fault.DROP_RESPONSE, frozenset({"SendMessage"}), limit=1)),
        pytest.raises((ConnectionClosedError, EndpointConnectionError)),
    ):
        client.send_message(QueueUrl=url, MessageBody="x")
    assert harness.counts(url) == (1, 0, 0)


@pytest.mark.parametrize("fault", [Fault.DELAY, Fault.SLOW_RESPONSE])
def test_latency(proxy: FaultProxy, client: SQSClient, url: str, fault: Fault) -> None:
    with proxy.rules(Rule(fault, delay=(0.4, 0.4))):
        started = time.monotonic()
        client.get_queue_attributes(QueueUrl=url)
    assert time.monotonic() - started >= 0.4


def test_refusing_then_restoring(
    proxy: FaultProxy, client: SQSClient, url: str
) -> None:
    proxy.refuse()
    try:
        with pytest.raises(EndpointConnectionError):
            client.get_queue_attributes(QueueUrl=url)
    finally:
        proxy.restore()
    client.get_queue_attributes(QueueUrl=url)
    assert proxy.refusals == 1
