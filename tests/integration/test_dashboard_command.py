"""``flask sqs-jobs dashboard`` as a real process serving real HTTP."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import re
import typing as t
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import ROOT
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env

if t.TYPE_CHECKING:
    import collections.abc as cabc

    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeQueue

_URL = re.compile(r"dashboard on (http://(\S+):(\d+)/\?token=([A-Za-z0-9_-]+)) ")


class Served(t.NamedTuple):
    url: str
    host: str
    port: int
    token: str


@pytest.fixture
def serve(
    sqs_endpoint: str, sqs_client: SQSClient, make_queue: MakeQueue
) -> cabc.Iterator[t.Callable[..., Served]]:
    """Start the command (on ``--host``) with one visible message; its printed URL."""
    processes: list[WorkerProcess] = []

    def start(*host: str) -> Served:
        url = make_queue("dash-cmd")
        sqs_client.send_message(QueueUrl=url, MessageBody="{}")
        env = subprocess_env(
            {
                "TEST_APP_ENDPOINT": sqs_endpoint,
                "TEST_APP_QUEUES": json.dumps({"default": {"url": url}}),
            }
        )
        process = WorkerProcess(
            flask_command("sqs-jobs", "dashboard", "--port", "0", *host),
            env=env,
            cwd=ROOT,
        )
        processes.append(process)
        wait_until(
            lambda: any(_URL.search(x) for x in process.lines), 30, process.output
        )
        match = next(m for x in process.lines if (m := _URL.search(x)))
        return Served(match[1], match[2], int(match[3]), match[4])

    try:
        yield start
    finally:
        for process in processes:
            process.close()


def _get(
    served: Served, path: str, host_header: str | None = None, **headers: str
) -> tuple[int, str, http.client.HTTPMessage]:
    """One GET on a raw connection, naming any ``Host``."""
    address = served.host.strip("[]")
    connection = http.client.HTTPConnection(address, served.port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host_header or f"{served.host}:{served.port}")
        for name, value in headers.items():
            connection.putheader(name.replace("_", "-"), value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode(), response.headers
    finally:
        connection.close()


def test_the_command_serves_the_dashboard_to_whoever_opened_its_url(
    serve: t.Callable[..., Served],
) -> None:
    served = serve()
    assert served.host == "127.0.0.1"
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )

    request = urllib.request.Request(served.url, headers={"Accept": "application/json"})
    with opener.open(request, timeout=10) as response:
        data = json.load(response)
        landed = response.url
        policy = response.headers["Content-Security-Policy"]

    assert [(q["queue"], q["visible"]) for q in data["queues"]] == [("default", 1)]
    assert "frame-ancestors 'none'" in policy
    assert "token" not in urllib.parse.urlsplit(landed).query
    with opener.open(f"http://127.0.0.1:{served.port}/schedules", timeout=10) as page:
        assert page.status == 200


def test_the_command_refuses_requests_without_the_token(
    serve: t.Callable[..., Served],
) -> None:
    served = serve()

    status, body, _ = _get(served, "/", Accept="application/json")
    wrong, _, _ = _get(served, "/?token=not-the-token")

    assert (status, wrong) == (403, 403)
    assert "needs the token of this run" in body
    assert served.token not in body


@pytest.mark.parametrize(
    "host_header",
    [
        "evil.example",
        "evil.example:{port}",
        "rebind.attacker.test:{port}",
        "localhost:1",
    ],
)
def test_the_command_refuses_a_host_that_is_not_its_own_even_with_the_token(
    serve: t.Callable[..., Served], host_header: str
) -> None:
    served = serve()

    status, body, headers = _get(
        served,
        f"/?token={served.token}",
        host_header.format(port=served.port),
        Authorization=f"Bearer {served.token}",
    )

    assert status == 421
    assert body.startswith("Refused: ")
    assert "Set-Cookie" not in headers


def _has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_the_command_serves_on_ipv6_loopback(serve: t.Callable[..., Served]) -> None:
    served = serve("--host", "[::1]")
    assert served.host == "[::1]"

    ok, body, _ = _get(
        served, "/", Accept="application/json", Authorization=f"Bearer {served.token}"
    )
    by_name, _, _ = _get(
        served, "/", f"localhost:{served.port}", Authorization=f"Bearer {served.token}"
    )

    assert (ok, by_name) == (200, 200)
    assert json.loads(body)["queues"][0]["queue"] == "default"
