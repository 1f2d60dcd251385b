"""``flask sqs-jobs dashboard``: loopback only; the standalone app it serves answers
only loopback Hosts with its port, and only with the token of its run."""

from __future__ import annotations

import socket
import typing as t

import pytest
from flask_sqs_jobs.dashboard._serve import is_loopback
from flask_sqs_jobs.dashboard._serve import name_cookies
from flask_sqs_jobs.dashboard._serve import standalone_app
from flask_sqs_jobs.dashboard._serve import TOKEN_EXTENSION

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from flask_sqs_jobs import SQSJobs
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import Queues

TOKEN = "run-token-0123456789"
#: The test client's requests arrive on port 80 of "localhost".
COOKIE = "sqs_jobs_dashboard_token_80"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_only_loopback_hosts_are_accepted(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "example.com"])
def test_the_command_refuses_a_host_others_can_reach(
    dashboard_app: Flask, host: str
) -> None:
    result = dashboard_app.test_cli_runner().invoke(
        args=["sqs-jobs", "dashboard", "--host", host]
    )

    assert result.exit_code == 2
    assert "is not a loopback address" in result.output
    assert "authorize=" in result.output


def test_a_port_that_cannot_be_bound_is_one_line_without_traceback(
    dashboard_app: Flask,
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        result = dashboard_app.test_cli_runner().invoke(
            args=["sqs-jobs", "dashboard", "--port", str(port)]
        )
    finally:
        taken.close()

    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.output.startswith(f"Error: cannot listen on 127.0.0.1 port {port}")
    assert len(result.output.splitlines()) == 1


@pytest.fixture
def server_app(dashboard_app: Flask) -> Flask:
    return standalone_app(
        dashboard_app.extensions["sqs_jobs"], dashboard_app, token=TOKEN
    )


@pytest.fixture
def signed_in(server_app: Flask) -> FlaskClient:
    """A client that opened the printed URL."""
    client = server_app.test_client()
    assert client.get(f"/?token={TOKEN}").status_code == 303
    return client


def test_the_standalone_app_serves_the_dashboard_at_the_root(
    signed_in: FlaskClient,
) -> None:
    data = signed_in.get("/", headers=JSON).get_json()

    assert [q["queue"] for q in data["queues"]] == ["default", "other"]
    assert signed_in.get("/queues/default/dead-letters").status_code == 200
    with signed_in.get("/static/dashboard.js") as script:
        assert script.status_code == 200


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_address_bar(
    server_app: Flask,
) -> None:
    client = server_app.test_client()

    response = client.get(f"/queues/default/dead-letters?limit=5&token={TOKEN}")

    assert response.status_code == 303
    assert response.headers["Location"] == "/queues/default/dead-letters?limit=5"
    cookie = client.get_cookie(COOKIE)
    assert cookie is not None
    assert cookie.value == TOKEN
    assert cookie.http_only
    assert cookie.same_site == "Strict"
    assert client.get("/queues/default/dead-letters?limit=5").status_code == 200


@pytest.mark.parametrize(
    "credentials",
    [
        {},
        {"query_string": {"token": "wrong"}},
        {"query_string": {"token": ""}},
        {"headers": {"Cookie": f"{COOKIE}=wrong"}},
        {"headers": {"Cookie": f"sqs_jobs_dashboard_token_8000={TOKEN}"}},
        {"headers": {"Authorization": "Bearer wrong"}},
        {"headers": {"Authorization": f"Basic {TOKEN}"}},
    ],
)
@pytest.mark.parametrize(
    "path", ["/", "/queues/default/dead-letters", "/static/dashboard.js"]
)
def test_a_request_without_the_token_of_this_run_is_refused(
    server_app: Flask, path: str, credentials: dict[str, t.Any]
) -> None:
    response = server_app.test_client().get(path, **credentials)

    assert response.status_code == 403
    assert response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert "needs the token of this run" in text
    assert "?token=" in text
    assert TOKEN not in text
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_a_script_may_send_the_token_as_a_bearer_header(server_app: Flask) -> None:
    client = server_app.test_client()

    response = client.get("/", headers={**JSON, "Authorization": f"Bearer {TOKEN}"})

    assert response.status_code == 200
    assert response.get_json()["queues"]


def test_a_post_without_the_token_changes_nothing(
    server_app: Flask, signed_in: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    token = csrf_token(signed_in, "/queues/default/dead-letters")
    stranger = server_app.test_client()
    # The stranger has a session and its CSRF token, but not the run's token.
    stranger.set_cookie("session", signed_in.get_cookie("session").value)  # type: ignore[union-attr]

    response = stranger.post(
        "/queues/default/dead-letters",
        data={
            "csrf_token": token,
            "action": "delete",
            "scope": "all",
            "confirmed": "yes",
        },
    )

    assert response.status_code == 403
    assert message_count(sqs, queues.dead_letters) == 1
    done = signed_in.post(
        "/queues/default/dead-letters",
        data={
            "csrf_token": token,
            "action": "delete",
            "scope": "all",
            "confirmed": "yes",
        },
        headers=JSON,
    )
    assert done.get_json()["done"] == 1


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:80",
        "rebind.attacker.test:80",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "192.168.1.10",
        "0.0.0.0",
        "[::]",
        "::1",
        "localhost:8000",
        "127.0.0.1:81",
        "[::1]:8080",
        "localhost:80x",
        "localhost:",
        "[::1",
    ],
)
def test_a_host_that_is_not_loopback_with_the_port_is_refused_before_the_token(
    server_app: Flask, host: str
) -> None:
    client = server_app.test_client()

    response = client.get(
        f"/?token={TOKEN}", headers={"Host": host, "Authorization": f"Bearer {TOKEN}"}
    )

    assert response.status_code == 421
    text = response.get_data(as_text=True)
    assert text.startswith("Refused: ")
    assert "http://127.0.0.1:80/" in text
    assert client.get_cookie(COOKIE) is None


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LocalHost:80",
        "127.0.0.1",
        "127.0.0.1:80",
        "127.8.9.10",
        "[::1]:80",
    ],
)
def test_loopback_names_with_the_served_port_are_answered(
    server_app: Flask, host: str
) -> None:
    client = server_app.test_client()

    response = client.get(
        "/", headers={"Host": host, "Authorization": f"Bearer {TOKEN}"}
    )

    assert response.status_code == 200


def test_the_rebinding_message_names_the_attack(server_app: Flask) -> None:
    response = server_app.test_client().get("/", headers={"Host": "evil.example"})

    assert "DNS rebinding" in response.get_data(as_text=True)


def test_each_app_gets_a_token_of_its_own(dashboard_app: Flask) -> None:
    jobs: SQSJobs = dashboard_app.extensions["sqs_jobs"]
    first, second = (standalone_app(jobs, dashboard_app) for _ in range(2))
    token = first.extensions[TOKEN_EXTENSION]

    assert len(token) >= 40
    assert second.extensions[TOKEN_EXTENSION] != token
    bearer = {"Authorization": f"Bearer {token}"}
    assert first.test_client().get("/", headers=bearer).status_code == 200
    assert second.test_client().get("/", headers=bearer).status_code == 403


def test_cookies_are_named_after_the_port(server_app: Flask) -> None:
    name_cookies(server_app, 8123)

    assert server_app.config["SESSION_COOKIE_NAME"] == "sqs_jobs_dashboard_session_8123"
    assert server_app.config["SESSION_COOKIE_SAMESITE"] == "Strict"


def test_the_standalone_app_has_a_session_key_without_the_apps(
    make_dashboard_app: t.Any,
) -> None:
    app = make_dashboard_app(config={"SECRET_KEY": None})

    server_app = standalone_app(app.extensions["sqs_jobs"], app, token=TOKEN)

    assert len(server_app.secret_key or "") == 64
    client = server_app.test_client()
    page = client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert "no <code>SECRET_KEY</code>" not in page.get_data(as_text=True)


def test_a_bracketed_ipv6_host_is_bound_without_its_brackets(
    dashboard_app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flask_sqs_jobs.dashboard import _serve

    bound: list[str] = []

    def cannot_listen(host: str, port: int) -> t.NoReturn:
        bound.append(host)
        raise OSError(99, "Cannot assign requested address")

    monkeypatch.setattr(_serve, "_listen", cannot_listen)
    for host in ("[::1]", "::1"):
        result = dashboard_app.test_cli_runner().invoke(
            args=["sqs-jobs", "dashboard", "--host", host, "--port", "8000"]
        )
        assert result.exit_code == 1
        assert result.output == (
            "Error: cannot listen on [::1] port 8000: Cannot assign requested"
            " address (is IPv6 turned off on this machine? try --host 127.0.0.1)\n"
        )
    assert bound == ["::1", "::1"]
