"""The health server on real sockets: what a probe, a slow or hostile client
and an operator reading ``/status`` see."""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import json
import socket
import time
import typing as t

import pytest
from botocore.exceptions import ClientError
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs.engine import HealthServer
from flask_sqs_jobs.engine.ops import _probe_http
from flask_sqs_jobs.engine.ops._health import public_error

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.engine.helpers import WorkerThread
from tests.probe_clients import closed_by_peer
from tests.probe_clients import Crowd
from tests.probe_clients import get
from tests.probe_clients import PROBE_DEADLINE
from tests.probe_clients import read_until_closed
from tests.probe_clients import request

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

ACCOUNT = "123456789012"
DENIED = (
    f"User: arn:aws:iam::{ACCOUNT}:user/deployer is not authorized to perform:"
    f" sqs:receivemessage on resource: arn:aws:sqs:us-east-1:{ACCOUNT}:jobs"
)


@pytest.fixture
def server(sqs: SQSClient, queue_url: str) -> cabc.Iterator[HealthServer]:
    worker = JobWorker(one_queue_group(sqs, queue_url), {})
    health = HealthServer(worker)
    health.start()
    yield health
    health.stop()


def timed_get(port: int, path: str = "/healthz") -> tuple[int, bytes, float]:
    started = time.monotonic()
    status, _headers, body = get(port, path)
    return status, body, time.monotonic() - started


def test_every_answer_closes_the_connection(server: HealthServer) -> None:
    status, headers, body = get(server.port, "/healthz")
    head_status, head_headers, head_body = get(server.port, "/healthz", "HEAD")

    assert (status, body, headers["connection"]) == (200, b"ok", "close")
    assert (head_status, head_body) == (200, b"")
    assert head_headers["content-length"] == "2"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_only_get_and_head_are_served(server: HealthServer, method: str) -> None:
    status, headers, _ = get(server.port, "/healthz", method)

    assert status == 405
    assert headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    "raw",
    [b"GET /healthz\r\n\r\n", b"garbage\r\n\r\n", b"GET healthz HTTP/1.1\r\n\r\n"],
)
def test_a_malformed_request_gets_400(server: HealthServer, raw: bytes) -> None:
    assert request(server.port, raw)[0] == 400


@pytest.mark.parametrize("size", [9 * 1024, 1024 * 1024])
def test_a_huge_header_gets_431_and_a_closed_connection(
    server: HealthServer, size: int
) -> None:
    raw = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * size + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        with contextlib.suppress(OSError):  # the server may reset it meanwhile
            sock.sendall(raw)
        answer = read_until_closed(sock, _probe_http.REQUEST_TIMEOUT + 2)

    assert answer is not None, "the connection was left open"
    if size < 64 * 1024:
        assert answer.startswith(b"HTTP/1.1 431 "), answer
    else:  # sent faster than dropped: answered, or reset before it was read
        assert answer.startswith(b"HTTP/1.1 431 ") or answer == b""


def test_a_request_must_be_complete_within_the_deadline_not_per_byte(
    server: HealthServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        started = time.monotonic()
        closed = False
        for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            if closed_by_peer(sock, 0.25):  # one byte every quarter second
                closed = True
                break
        took = time.monotonic() - started

    assert closed
    assert _probe_http.REQUEST_TIMEOUT <= took < _probe_http.REQUEST_TIMEOUT + 2


def test_an_idle_connection_is_closed_after_the_deadline(server: HealthServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        assert closed_by_peer(sock, _probe_http.REQUEST_TIMEOUT + 2)


def test_a_probe_is_answered_at_once_however_many_slow_clients_there_are(
    server: HealthServer,
) -> None:
    crowd = Crowd(server.port, idle=200, dribbling=20, mute=20)
    try:
        # Across more than a request deadline, while the crowd keeps coming back.
        until = time.monotonic() + _probe_http.REQUEST_TIMEOUT + 1
        answers = []
        while time.monotonic() < until:
            answers.append(timed_get(server.port))
        more = Crowd(server.port, idle=100, dribbling=0, mute=0)
        answers.append(timed_get(server.port))
        more.close()
    finally:
        crowd.close()

    assert {(status, body) for status, body, _ in answers} == {(200, b"ok")}
    assert max(took for _, _, took in answers) < PROBE_DEADLINE


def test_a_probe_that_sent_its_first_bytes_outlives_the_silent_connections(
    server: HealthServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as probe:
        probe.sendall(b"GET /healthz HTTP/1.1\r\n")  # the rest comes later
        # Silent connections past the limit, each evicting an older one: never
        # the probe, although it is the oldest.
        crowd = Crowd(
            server.port, idle=_probe_http.MAX_CONNECTIONS * 3, dribbling=0, mute=0
        )
        try:
            probe.sendall(b"Host: probe\r\n\r\n")
            answer = read_until_closed(probe, PROBE_DEADLINE)
        finally:
            crowd.close()
    assert answer is not None
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_a_probe_slow_to_send_its_request_is_not_pushed_out_by_a_flood(
    server: HealthServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as probe:
        # Silent connections arrive after the probe connected, before it sends.
        crowd = Crowd(
            server.port, idle=_probe_http.MAX_CONNECTIONS * 3, dribbling=0, mute=0
        )
        try:
            # Pacing, not synchronisation: a probe on a loaded host that needs
            # a while after connecting (well within the kernel's hold).
            time.sleep(_probe_http._SILENT_HOLD / 4)
            probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
            answer = read_until_closed(probe, PROBE_DEADLINE)
        finally:
            crowd.close()
    assert answer is not None
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_status_names_the_error_code_but_not_the_account(
    sqs: SQSClient, queue_url: str
) -> None:
    spy = SpyClient(sqs)

    def deny(_kwargs: dict[str, t.Any]) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDenied", "Message": DENIED}}, "ReceiveMessage"
        )

    spy.before["receive_message"] = deny
    worker = JobWorker(one_queue_group(spy.client, queue_url), {}, None, 1)
    health = HealthServer(worker)
    health.start()
    running = WorkerThread(worker)
    try:

        def failed() -> bool:
            return bool(worker.queue_failures()["jobs"])

        assert poll_until(failed)
        status, _, body = get(health.port, "/status")
    finally:
        worker.request_stop()
        running.join()
        health.stop()

    assert status == 200  # failing for less than the max age
    report = json.loads(body)
    assert report["queues"]["jobs"]["last_error"] == "ClientError: AccessDenied"
    assert ACCOUNT not in body.decode()
    assert "arn:" not in body.decode()
    # The worker's own view keeps the text, for its logs.
    assert ACCOUNT in worker.queue_errors()["jobs"]


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (None, None),
        (
            "ClientError: An error occurred (AWS.SimpleQueueService.NonExistentQueue)"
            " when calling the ReceiveMessage operation: The specified queue does"
            f" not exist for this wsdl version. arn:aws:sqs:us-east-1:{ACCOUNT}:q",
            "ClientError: AWS.SimpleQueueService.NonExistentQueue",
        ),
        (
            "EndpointConnectionError: Could not connect to the endpoint URL:"
            f' "https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/jobs"',
            "EndpointConnectionError",
        ),
        (f"ValueError: {ACCOUNT}", "ValueError"),
        (f"not a class: {ACCOUNT}", "Error"),
        ("ClientError: An error occurred (arn:aws:iam::1:x)", "ClientError"),
    ],
)
def test_public_error_keeps_only_the_class_and_aws_code(
    error: str | None, shown: str | None
) -> None:
    assert public_error(error) == shown


def test_a_client_that_half_closes_after_its_request_gets_the_answer(
    server: HealthServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        answer = read_until_closed(sock, PROBE_DEADLINE)

    assert answer is not None
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.endswith(b"\r\n\r\nok")
