"""``authorize()``: exactly True lets through, a Response is the answer, False or
None is a 403, and anything else is a 500 that the log explains."""

from __future__ import annotations

import typing as t

import pytest
import structlog.testing
import werkzeug.wrappers
from flask import redirect
from flask import Response

from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

PAGES = [
    "/jobs/",
    "/jobs/queues/default/dead-letters",
    "/jobs/jobs",
    "/jobs/workers",
    "/jobs/schedules",
    "/jobs/static/dashboard.js",
]


class User:
    def is_admin(self) -> bool:
        return False


class Truthy:
    def __bool__(self) -> bool:
        return True


#: What an app may return by mistake: each truthy, none of them True.
MISTAKES: list[tuple[str, t.Callable[[], object]]] = [
    ("a string", lambda: "no"),
    ("the string 'True'", lambda: "True"),
    ("a method left uncalled", lambda: User().is_admin),
    ("a lambda left uncalled", lambda: lambda: False),
    ("a class", lambda: User),
    ("an int", lambda: 1),
    ("a truthy object", Truthy),
    ("a tuple", lambda: (True,)),
    ("a dict", lambda: {"allowed": True}),
    ("a list", lambda: [True]),
    ("an empty string", lambda: ""),
    ("zero", lambda: 0),
    ("a Response in a tuple", lambda: (Response("x"), 200)),
]


@pytest.mark.parametrize(("what", "authorize"), MISTAKES, ids=[m[0] for m in MISTAKES])
@pytest.mark.parametrize("path", PAGES)
def test_anything_but_true_false_none_or_a_response_is_a_logged_500(
    make_dashboard_app: MakeDashboardApp,
    what: str,
    authorize: t.Callable[[], object],
    path: str,
) -> None:
    client = make_dashboard_app(authorize).test_client()

    with structlog.testing.capture_logs() as logs:
        response = client.get(path)

    assert response.status_code == 500
    [event] = [e for e in logs if e["event"] == "dashboard_authorize_invalid"]
    assert event["log_level"] == "error"
    assert event["path"] == path
    returned = event["returned"]
    assert returned.split(":", 1)[0].endswith(type(authorize()).__qualname__)
    assert "must return True" in event["fix"]
    assert ("call it" in event["fix"]) is callable(authorize())


def test_a_refusal_by_mistake_changes_nothing(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)
    client = make_dashboard_app(lambda: "yes").test_client()

    response = client.post(
        "/jobs/queues/default/dead-letters",
        data={"action": "delete", "scope": "all", "confirmed": "yes"},
    )

    assert response.status_code == 500
    assert message_count(sqs, queues.dead_letters) == 1


@pytest.mark.parametrize("refusal", [False, None])
@pytest.mark.parametrize("path", PAGES)
def test_false_and_none_are_403(
    make_dashboard_app: MakeDashboardApp, refusal: object, path: str
) -> None:
    client = make_dashboard_app(lambda: refusal).test_client()

    with structlog.testing.capture_logs() as logs:
        response = client.get(path, headers=JSON)

    assert response.status_code == 403
    assert response.get_json()["status"] == 403
    assert logs == []


def test_a_redirect_is_answered_as_it_is(make_dashboard_app: MakeDashboardApp) -> None:
    client = make_dashboard_app(lambda: redirect("/login?next=/jobs/")).test_client()

    response = client.get("/jobs/queues/default/dead-letters")

    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=/jobs/"
    assert "Content-Security-Policy" in response.headers


@pytest.mark.parametrize(
    "answer",
    [
        lambda: Response("sign in first", 401, {"WWW-Authenticate": "Basic"}),
        lambda: werkzeug.wrappers.Response("nope", 429),
    ],
)
def test_any_response_is_answered_as_it_is(
    make_dashboard_app: MakeDashboardApp,
    sqs: SQSClient,
    queues: Queues,
    answer: t.Callable[[], werkzeug.wrappers.Response],
) -> None:
    dead_letter(sqs, queues.dead_letters)
    expected = answer()
    client = make_dashboard_app(answer).test_client()

    response = client.post(
        "/jobs/queues/default/dead-letters",
        data={"action": "delete", "scope": "all", "confirmed": "yes"},
    )

    assert response.status_code == expected.status_code
    assert response.get_data() == expected.get_data()
    assert message_count(sqs, queues.dead_letters) == 1


def test_only_true_lets_the_request_through(
    make_dashboard_app: MakeDashboardApp,
) -> None:
    client = make_dashboard_app(lambda: True).test_client()

    assert client.get("/jobs/").status_code == 200
