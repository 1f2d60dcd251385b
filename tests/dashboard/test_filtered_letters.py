"""Dead letters by filter (job type, error type): shown, counted, then acted on."""

from __future__ import annotations

import json
import typing as t

from tests.support import visible_messages

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

PATH = "/jobs/queues/default/dead-letters"


def _fill(sqs: SQSClient, queues: Queues) -> None:
    for n, (job_type, error_type) in enumerate(
        [
            ("send_email", "ValueError"),
            ("send_email", "TimeoutError"),
            ("charge", "ValueError"),
            ("send_email", "ValueError"),
        ]
    ):
        dead_letter(sqs, queues.dead_letters, job_type, {"n": n}, error_type=error_type)


def _post(client: FlaskClient, confirmed: bool, **form: t.Any) -> t.Any:
    data = {"csrf_token": csrf_token(client), "scope": "filtered", **form}
    if confirmed:
        data["confirmed"] = "yes"
    return client.post(PATH, data=data)


def _payloads(sqs: SQSClient, url: str) -> list[int]:
    return sorted(
        json.loads(m["Body"])["payload"]["n"] for m in visible_messages(sqs, url)
    )


def test_the_page_shows_only_the_letters_that_match(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    data = client.get(
        f"{PATH}?job_type=send_email&error_type=ValueError", headers=JSON
    ).get_json()
    page = client.get(f"{PATH}?job_type=send_email").get_data(as_text=True)

    assert sorted(
        letter["reason"]["error_type"] for letter in data["dead_letters"]
    ) == [
        "ValueError",
        "ValueError",
    ]
    assert {letter["job_type"] for letter in data["dead_letters"]} == {"send_email"}
    assert data["filter"] == {"job_type": "send_email", "error_type": "ValueError"}
    assert 'id="redrive-filtered"' in page
    assert "<code>charge</code>" not in page
    assert message_count(sqs, queues.dead_letters) == 4


def test_a_filtered_redrive_is_counted_then_moves_only_the_matching_letters(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    filters = {
        "action": "redrive",
        "job_type": "send_email",
        "error_type": "ValueError",
    }

    asked = _post(client, confirmed=False, **filters)
    page = asked.get_data(as_text=True)
    assert asked.status_code == 200
    assert 'Confirm: redrive <span id="matching">2</span> dead letter(s)' in page
    assert "2 match now, of 4 read" in page
    assert 'name="expected" value="2"' in page
    assert message_count(sqs, queues.dead_letters) == 4
    assert message_count(sqs, queues.source) == 0

    done = _post(client, confirmed=True, expected="2", **filters)
    assert "Redriven: 2 dead letter(s)" in done.get_data(as_text=True)
    assert _payloads(sqs, queues.source) == [0, 3]
    assert _payloads(sqs, queues.dead_letters) == [1, 2]


def test_a_filtered_delete_by_error_type_deletes_only_those(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    done = _post(client, confirmed=True, action="delete", error_type="ValueError")
    assert "Deleted: 3 dead letter(s)" in done.get_data(as_text=True)
    assert _payloads(sqs, queues.dead_letters) == [1]


def test_a_changed_queue_is_reported_against_the_confirmed_count(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    done = _post(
        client, confirmed=True, action="delete", job_type="charge", expected="5"
    )
    page = done.get_data(as_text=True)
    assert "Deleted: 1 dead letter(s)" in page
    assert "5\nmatched when you confirmed" in page


def test_a_filtered_action_without_a_filter_is_refused(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    response = _post(client, confirmed=True, action="delete")
    assert response.status_code == 400
    assert "no filter given" in response.get_data(as_text=True)
    assert message_count(sqs, queues.dead_letters) == 4


def test_a_filtered_action_without_the_csrf_token_does_nothing(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    response = client.post(
        PATH,
        data={
            "scope": "filtered",
            "action": "delete",
            "job_type": "send_email",
            "confirmed": "yes",
        },
    )
    assert response.status_code == 400
    assert message_count(sqs, queues.dead_letters) == 4


def test_filtering_is_refused_without_authorize(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, queues: Queues
) -> None:
    _fill(sqs, queues)
    client = make_dashboard_app(lambda: False).test_client()
    assert client.get(f"{PATH}?job_type=send_email").status_code == 403
    posted = client.post(
        PATH, data={"scope": "filtered", "action": "delete", "job_type": "send_email"}
    )
    assert posted.status_code == 403
    assert message_count(sqs, queues.dead_letters) == 4


def test_hostile_filter_values_are_escaped(
    dashboard_app: Flask, sqs: SQSClient, queues: Queues
) -> None:
    client = dashboard_app.test_client()
    hostile = '"><script>x</script>'
    dead_letter(sqs, queues.dead_letters, hostile, {"n": 9}, error_type=hostile)
    listed = client.get(
        PATH, query_string={"job_type": hostile, "error_type": hostile}
    ).get_data(as_text=True)
    asked = _post(
        client, confirmed=False, action="delete", job_type=hostile, error_type=hostile
    ).get_data(as_text=True)
    for page in (listed, asked):
        assert "<script>x</script>" not in page
        assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "1 match now, of 1 read" in asked
