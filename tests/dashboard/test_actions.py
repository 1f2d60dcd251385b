"""Redrive and delete of one dead letter, a selection and all, each confirmed."""

from __future__ import annotations

import json
import typing as t

import pytest
from botocore.exceptions import ClientError
from flask_sqs_jobs.engine.sqs._queue import SqsQueue

from tests.support import visible_messages

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON
from .conftest import message_count

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import Queues

PATH = "/jobs/queues/default/dead-letters"


def _letters(sqs: SQSClient, queues: Queues, count: int) -> list[str]:
    return [
        dead_letter(sqs, queues.dead_letters, "send_email", {"n": n})
        for n in range(count)
    ]


def _act(
    client: FlaskClient,
    action: str,
    scope: str,
    message_ids: list[str] = (),  # type: ignore[assignment]
    *,
    confirmed: bool = True,
    json_answer: bool = False,
) -> t.Any:
    form: dict[str, t.Any] = {
        "csrf_token": csrf_token(client),
        "action": action,
        "scope": scope,
        "message_id": list(message_ids),
    }
    if confirmed:
        form["confirmed"] = "yes"
    return client.post(PATH, data=form, headers=JSON if json_answer else {})


def _payloads(sqs: SQSClient, url: str) -> list[int]:
    return sorted(
        json.loads(m["Body"])["payload"]["n"] for m in visible_messages(sqs, url)
    )


def test_an_unconfirmed_action_shows_a_confirmation_and_changes_nothing(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    (message_id,) = _letters(sqs, queues, 1)

    response = _act(client, "delete", "selected", [message_id], confirmed=False)

    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Confirm: delete 1 dead letter(s)" in page
    assert 'name="confirmed" value="yes"' in page
    assert f'name="message_id" value="{message_id}"' in page
    assert "gone for good" in page
    assert message_count(sqs, queues.dead_letters) == 1


def test_redrive_one_moves_it_back_with_its_body_and_without_the_reason(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    first, _second = _letters(sqs, queues, 2)

    response = _act(client, "redrive", "selected", [first])

    assert response.status_code == 200
    assert "Redriven: 1 dead letter(s)" in response.get_data(as_text=True)
    (moved,) = visible_messages(sqs, queues.source)
    assert json.loads(moved["Body"])["payload"] == {"n": 0}
    assert "dead_letter" not in moved.get("MessageAttributes", {})
    assert _payloads(sqs, queues.dead_letters) == [1]


def test_redrive_a_selection(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    ids = _letters(sqs, queues, 4)

    data = _act(client, "redrive", "selected", ids[1:3], json_answer=True).get_json()

    assert data == {
        "queue": "default",
        "action": "redrive",
        "scope": "selected",
        "message_ids": ids[1:3],
        "filter": None,
        "expected": None,
        "confirmed": True,
        "done": 2,
        "not_found": 0,
        "left": 2,
    }
    assert _payloads(sqs, queues.source) == [1, 2]
    assert _payloads(sqs, queues.dead_letters) == [0, 3]


def test_redrive_all(client: FlaskClient, sqs: SQSClient, queues: Queues) -> None:
    _letters(sqs, queues, 12)

    data = _act(client, "redrive", "all", json_answer=True).get_json()

    assert (data["done"], data["left"]) == (12, 0)
    assert message_count(sqs, queues.source) == 12
    assert message_count(sqs, queues.dead_letters) == 0


def test_delete_one_a_selection_and_all(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    ids = _letters(sqs, queues, 5)

    one = _act(client, "delete", "selected", [ids[0]], json_answer=True).get_json()
    assert _payloads(sqs, queues.dead_letters) == [1, 2, 3, 4]
    some = _act(client, "delete", "selected", ids[1:3], json_answer=True).get_json()
    assert _payloads(sqs, queues.dead_letters) == [3, 4]
    every = _act(client, "delete", "all", json_answer=True).get_json()

    assert [one["done"], some["done"], every["done"]] == [1, 2, 2]
    assert message_count(sqs, queues.dead_letters) == 0
    assert message_count(sqs, queues.source) == 0


def test_a_selected_message_no_longer_there_is_reported_not_found(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    (message_id,) = _letters(sqs, queues, 1)

    data = _act(
        client, "delete", "selected", [message_id, "gone-id"], json_answer=True
    ).get_json()

    assert (data["done"], data["not_found"]) == (1, 1)


@pytest.mark.parametrize(
    ("form", "problem"),
    [
        ({"action": "purge", "scope": "all"}, "action must be one of"),
        ({"action": "delete", "scope": "some"}, "scope must be one of"),
        ({"action": "delete", "scope": "selected"}, "no dead letter selected"),
    ],
)
def test_bad_actions_are_refused_with_the_reason(
    client: FlaskClient,
    sqs: SQSClient,
    queues: Queues,
    form: dict[str, str],
    problem: str,
) -> None:
    _letters(sqs, queues, 1)
    form = {**form, "csrf_token": csrf_token(client), "confirmed": "yes"}

    response = client.post(PATH, data=form, headers=JSON)

    assert response.status_code == 400
    assert problem in response.get_json()["message"]
    assert message_count(sqs, queues.dead_letters) == 1


def _refuse_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    def send(self: SqsQueue, params: t.Any, *, url: str | None = None) -> str:
        error = {"Error": {"Code": "InternalError", "Message": "send refused"}}
        raise ClientError(error, "SendMessage")  # type: ignore[arg-type]

    monkeypatch.setattr(SqsQueue, "send", send)


@pytest.mark.parametrize("scope", ["one", "selected", "all"])
def test_a_failed_send_deletes_nothing(
    client: FlaskClient,
    sqs: SQSClient,
    queues: Queues,
    monkeypatch: pytest.MonkeyPatch,
    scope: str,
) -> None:
    ids = _letters(sqs, queues, 3)
    chosen = {"one": ids[:1], "selected": ids[:2], "all": []}[scope]
    _refuse_sends(monkeypatch)

    response = _act(client, "redrive", "all" if scope == "all" else "selected", chosen)

    page = response.get_data(as_text=True)
    assert response.status_code == 502
    assert "send refused" in page
    assert "No dead letter was deleted before it was sent again" in page
    assert message_count(sqs, queues.dead_letters) == 3
    assert message_count(sqs, queues.source) == 0
    if scope != "all":
        assert len(visible_messages(sqs, queues.dead_letters)) == 3
