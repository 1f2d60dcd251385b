"""Which Host a dashboard answers and which site may act through it.

A dashboard without ``authorize`` answers loopback Hosts only (DNS rebinding);
every dashboard refuses a state-changing request from another site.
"""

from __future__ import annotations

import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

PATH = "/jobs/queues/default/dead-letters"


def anonymous_app(sqs: SQSClient, **config: t.Any) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="s",
        SQS_JOBS_QUEUES={"default": {"name": "dash-default"}},
        **config,
    )
    jobs = SQSJobs(app, boto_client=sqs)
    app.register_blueprint(jobs.dashboard(allow_anonymous=True), url_prefix="/jobs")
    return app


REBINDING_HOSTS = [
    "evil.example",
    "evil.example:5000",
    "rebind.attacker.test:8000",
    "192.168.1.20:5000",
    "10.0.0.5",
    "localhost.evil.example:5000",
    "[::]:5000",
]


@pytest.mark.parametrize("host", REBINDING_HOSTS)
@pytest.mark.parametrize("path", ["/jobs/", PATH, "/jobs/static/dashboard.js"])
def test_an_anonymous_dashboard_refuses_a_host_that_is_not_loopback(
    sqs: SQSClient, queues: Queues, host: str, path: str
) -> None:
    dead_letter(sqs, queues.dead_letters)
    client = anonymous_app(sqs).test_client()

    response = client.get(path, headers={**JSON, "Host": host})

    assert response.status_code == 421
    message = response.get_json()["message"]
    assert "not a loopback name" in message
    assert "DNS rebinding" in message
    assert "TRUSTED_HOSTS" in message
    assert "authorize=" in message


def test_an_anonymous_dashboard_reads_nothing_for_a_rebinding_page(
    sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters, payload={"card": "4111-secret"})
    client = anonymous_app(sqs).test_client()

    response = client.get(PATH, headers={"Host": "evil.example:5000"})

    assert "4111-secret" not in response.get_data(as_text=True)
    assert receive_count(sqs, queues.dead_letters) == 1


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:5000", "127.0.0.1:5000", "127.0.0.2", "[::1]:5000"]
)
def test_an_anonymous_dashboard_answers_loopback_names_on_any_port(
    sqs: SQSClient, queues: Queues, host: str
) -> None:
    client = anonymous_app(sqs).test_client()

    assert client.get("/jobs/", headers={"Host": host}).status_code == 200


def test_trusted_hosts_let_an_anonymous_dashboard_answer_those_names_only(
    sqs: SQSClient, queues: Queues
) -> None:
    app = anonymous_app(sqs, TRUSTED_HOSTS=["jobs.internal", "localhost"])
    client = app.test_client()

    assert client.get("/jobs/", headers={"Host": "jobs.internal"}).status_code == 200
    assert client.get("/jobs/", headers={"Host": "localhost"}).status_code == 200
    # Flask itself refuses a name the list lacks.
    assert client.get("/jobs/", headers={"Host": "evil.example"}).status_code == 400


def test_a_dashboard_behind_authorize_answers_any_host(
    make_dashboard_app: MakeDashboardApp,
) -> None:
    client = make_dashboard_app().test_client()

    assert client.get("/jobs/", headers={"Host": "ops.example.com"}).status_code == 200


# -- state-changing requests from another site --


def _delete_all(client: FlaskClient, **headers: str) -> t.Any:
    token = csrf_token(client)
    form = {"csrf_token": token, "action": "delete", "scope": "all", "confirmed": "yes"}
    return client.post(PATH, data=form, headers={**JSON, **headers})


CROSS_SITE = [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost"},
    {"Origin": "https://evil.example"},
    {"Origin": "http://localhost:8080"},
    {"Origin": "null"},
    {"Origin": "not a url"},
]


@pytest.mark.parametrize("headers", CROSS_SITE)
@pytest.mark.parametrize("anonymous", [False, True])
def test_a_post_from_another_site_is_refused_with_a_valid_token(
    make_dashboard_app: MakeDashboardApp,
    sqs: SQSClient,
    queues: Queues,
    headers: dict[str, str],
    anonymous: bool,
) -> None:
    dead_letter(sqs, queues.dead_letters)
    app = anonymous_app(sqs) if anonymous else make_dashboard_app()
    client = app.test_client()

    response = _delete_all(client, **headers)

    assert response.status_code == 403
    assert "came from another site" in response.get_json()["message"]
    assert message_count(sqs, queues.dead_letters) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"},
        {"Sec-Fetch-Site": "none"},
        {"Origin": "http://localhost"},
        # Fetch metadata wins: an Origin a proxy rewrote does not matter then.
        {"Sec-Fetch-Site": "same-origin", "Origin": "https://jobs.example.com"},
    ],
)
def test_a_post_from_the_dashboard_itself_goes_through(
    client: FlaskClient, sqs: SQSClient, queues: Queues, headers: dict[str, str]
) -> None:
    dead_letter(sqs, queues.dead_letters)

    response = _delete_all(client, **headers)

    assert response.status_code == 200
    assert response.get_json()["done"] == 1


# -- peeking only for the dashboard's own page loads --


def receive_count(sqs: SQSClient, url: str) -> int:
    """The receive count of the one message on ``url`` once this call received it:
    1 when nothing received it before."""
    [message] = sqs.receive_message(
        QueueUrl=url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    return int(message["Attributes"]["ApproximateReceiveCount"])


def _fetch(site: str, mode: str, dest: str) -> dict[str, str]:
    return {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest}


NOT_A_PAGE_LOAD = {
    "an <img> on another site": _fetch("cross-site", "no-cors", "image"),
    "an <img> on a sibling site": _fetch("same-site", "no-cors", "image"),
    "an <img> of this origin": _fetch("same-origin", "no-cors", "image"),
    "a <script> on another site": _fetch("cross-site", "no-cors", "script"),
    "a link on another site": _fetch("cross-site", "navigate", "document"),
    "a form on another site": {**_fetch("cross-site", "navigate", "document")},
    "an <iframe> on another site": _fetch("cross-site", "navigate", "iframe"),
    "an <iframe> of this origin": _fetch("same-origin", "navigate", "iframe"),
    "a fetch from another site": _fetch("cross-site", "cors", "empty"),
    "a prefetch": {
        **_fetch("same-origin", "navigate", "document"),
        "Sec-Purpose": "prefetch",
    },
    "an old prefetch": {"Purpose": "prefetch"},
    "an old browser's <img> on another site": {"Referer": "https://evil.example/page"},
    "an old browser's fetch from another site": {"Origin": "https://evil.example"},
}


@pytest.mark.parametrize("headers", NOT_A_PAGE_LOAD.values(), ids=NOT_A_PAGE_LOAD)
def test_a_request_that_is_not_a_page_load_of_the_dashboard_does_not_peek(
    client: FlaskClient, sqs: SQSClient, queues: Queues, headers: dict[str, str]
) -> None:
    dead_letter(sqs, queues.dead_letters, payload={"card": "4111-secret"})

    page = client.get(PATH, headers=headers)
    data = client.get(PATH, headers={**headers, **JSON}).get_json()

    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "The dead letters were not read" in text
    assert 'id="show-dead-letters"' in text
    assert "4111-secret" not in text
    assert data["dead_letters"] == []
    assert data["counts"]["visible"] == 1
    assert data["peek_refused"]["own_redrive_policy"] is False
    assert data["peek_refused"]["reason"]
    assert receive_count(sqs, queues.dead_letters) == 1


def test_a_head_request_does_not_peek(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters)

    assert client.head(PATH).status_code == 200
    assert receive_count(sqs, queues.dead_letters) == 1


PAGE_LOADS = {
    "a click on a dashboard page": _fetch("same-origin", "navigate", "document"),
    "a typed address or a bookmark": _fetch("none", "navigate", "document"),
    "the dashboard's own script": _fetch("same-origin", "cors", "empty"),
    "a script or curl": {},
    "an old browser on this origin": {"Referer": "http://localhost/jobs/"},
}


@pytest.mark.parametrize("headers", PAGE_LOADS.values(), ids=PAGE_LOADS)
def test_a_page_load_of_the_dashboard_peeks(
    client: FlaskClient, sqs: SQSClient, queues: Queues, headers: dict[str, str]
) -> None:
    message_id = dead_letter(sqs, queues.dead_letters)

    data = client.get(PATH, headers={**headers, **JSON}).get_json()

    assert [letter["message_id"] for letter in data["dead_letters"]] == [message_id]
    assert "peek_refused" not in data
    assert receive_count(sqs, queues.dead_letters) == 2


def test_the_show_link_is_a_page_load_of_the_dashboard(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    message_id = dead_letter(sqs, queues.dead_letters)
    page = client.get(
        PATH + "?limit=7", headers=_fetch("cross-site", "navigate", "document")
    ).get_data(as_text=True)
    assert f'href="{PATH}?limit=7" id="show-dead-letters"' in page

    # The browser follows it from the dashboard's own page.
    shown = client.get(
        PATH + "?limit=7", headers=_fetch("same-origin", "navigate", "document")
    )

    assert f'value="{message_id}"' in shown.get_data(as_text=True)
