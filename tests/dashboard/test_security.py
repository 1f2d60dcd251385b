"""authorize(), CSRF refusals and hostile message content."""

from __future__ import annotations

import typing as t

import pytest
import structlog.testing

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

PAGES = [
    "/jobs/",
    "/jobs/queues/default/dead-letters",
    "/jobs/jobs",
    "/jobs/jobs/j-1",
    "/jobs/workers",
    "/jobs/schedules",
    "/jobs/static/dashboard.js",
]


@pytest.mark.parametrize("path", PAGES)
def test_authorize_false_is_403_on_every_page(
    make_dashboard_app: MakeDashboardApp, path: str
) -> None:
    calls: list[str] = []

    def authorize() -> bool:
        calls.append(path)
        return False

    client = make_dashboard_app(authorize).test_client()

    assert client.get(path).status_code == 403
    assert client.get(path, headers=JSON).get_json()["status"] == 403
    assert calls == [path, path]


def test_authorize_false_refuses_actions_before_anything_happens(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    allowed = [True]
    client = make_dashboard_app(lambda: allowed[0]).test_client()
    token = csrf_token(client)
    allowed[0] = False

    response = client.post(
        "/jobs/queues/default/dead-letters",
        data={
            "csrf_token": token,
            "action": "delete",
            "scope": "all",
            "confirmed": "yes",
        },
    )

    assert response.status_code == 403
    assert message_count(sqs, queues.dead_letters) == 1


def test_authorize_raising_is_500_logged_and_not_shown(
    make_dashboard_app: MakeDashboardApp,
) -> None:
    def authorize() -> bool:
        raise RuntimeError("db password is hunter2")

    client = make_dashboard_app(authorize).test_client()
    with structlog.testing.capture_logs() as logs:
        response = client.get("/jobs/")

    assert response.status_code == 500
    assert "hunter2" not in response.get_data(as_text=True)
    assert [e["event"] for e in logs] == ["dashboard_authorize_failed"]


def _post(client: FlaskClient, **data: str) -> t.Any:
    form = {"action": "delete", "scope": "all", "confirmed": "yes", **data}
    return client.post("/jobs/queues/default/dead-letters", data=form)


def test_a_post_without_csrf_token_is_refused(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    client.get("/jobs/queues/default/dead-letters")

    response = _post(client)

    assert response.status_code == 400
    assert "no CSRF token" in response.get_data(as_text=True)
    assert message_count(sqs, queues.dead_letters) == 1


def test_a_wrong_csrf_token_is_refused(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    token = csrf_token(client)

    response = _post(client, csrf_token=token[:-2] + "xx")

    assert response.status_code == 400
    assert "not valid for this session" in response.get_data(as_text=True)
    assert message_count(sqs, queues.dead_letters) == 1


def test_a_csrf_token_from_another_session_is_refused(
    dashboard_app: t.Any, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    theirs = csrf_token(dashboard_app.test_client())
    mine = dashboard_app.test_client()
    csrf_token(mine)

    response = _post(mine, csrf_token=theirs)

    assert response.status_code == 400
    assert "another browser session" in response.get_data(as_text=True)
    assert message_count(sqs, queues.dead_letters) == 1


def test_a_token_signed_with_another_secret_key_is_refused(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    other = make_dashboard_app(config={"SECRET_KEY": "another"}).test_client()
    forged = csrf_token(other)
    client = make_dashboard_app().test_client()
    csrf_token(client)

    assert _post(client, csrf_token=forged).status_code == 400
    assert message_count(sqs, queues.dead_letters) == 1


def test_without_secret_key_actions_are_refused_with_the_reason(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    client = make_dashboard_app(config={"SECRET_KEY": None}).test_client()

    response = client.post(
        "/jobs/queues/default/dead-letters",
        data={"action": "delete", "scope": "all", "confirmed": "yes"},
        headers=JSON,
    )

    assert response.status_code == 400
    assert "the app has no SECRET_KEY" in response.get_json()["message"]
    assert message_count(sqs, queues.dead_letters) == 1


def test_a_script_may_send_the_token_from_the_json_answer_in_a_header(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    token = client.get("/jobs/queues/default/dead-letters", headers=JSON).get_json()[
        "csrf_token"
    ]

    response = client.post(
        "/jobs/queues/default/dead-letters",
        data={"action": "delete", "scope": "all", "confirmed": "yes"},
        headers={**JSON, "X-CSRF-Token": token},
    )

    assert response.get_json()["done"] == 1
    assert message_count(sqs, queues.dead_letters) == 0


def test_get_never_changes_state(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)

    query = "?action=delete&scope=all&confirmed=yes"
    client.get("/jobs/queues/default/dead-letters" + query)

    assert message_count(sqs, queues.dead_letters) == 1


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "javascript:alert(1)",
    "\x1b[2J\x1b[31mred",
    "lone \ud800 surrogate",
    'it\'s "quoted" & <b>bold</b>',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_message_content_is_escaped(
    client: FlaskClient, sqs: SQSClient, queues: Queues, text: str
) -> None:
    sqs.send_message(
        QueueUrl=queues.dead_letters,
        MessageBody='{"job_type": "x", "payload": {}}',
    )
    dead_letter(
        sqs,
        queues.dead_letters,
        job_type=text,
        payload={text: text},
        error=text,
        error_type=text,
    )

    response = client.get("/jobs/queues/default/dead-letters")
    page = response.get_data(as_text=True)

    assert response.status_code == 200
    for dangerous in ["<script>alert", "<img", "<b>", "\x1b", "\ud800"]:
        assert dangerous not in page
    assert 'href="javascript' not in page
    if text.startswith("<script>"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    data = client.get("/jobs/queues/default/dead-letters", headers=JSON)
    assert data.status_code == 200
    assert text in [letter["job_type"] for letter in data.get_json()["dead_letters"]]
