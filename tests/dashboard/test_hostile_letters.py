"""Dead letters built to hurt the dashboard: nested too deep, full of invisible or
reordering characters, or in a dead-letter queue that views would empty."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.support import create_queue
from tests.support import message_count

from .conftest import dead_letter
from .conftest import JSON
from .store_records import record_job

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp
    from .conftest import Queues

PATH = "/jobs/queues/default/dead-letters"
DEPTHS = [900, 5000, 100_000]


def nested_text(depth: int, kind: str) -> str:
    """JSON nested ``depth`` levels deep: lists, objects, or a reason holding one."""
    if kind == "lists":
        return "[" * depth + "]" * depth
    if kind == "objects":
        return '{"a":' * depth + "1" + "}" * depth
    inner = "[" * depth + "]" * depth
    return '{"error_type": "ValueError", "error": ' + inner + "}"


def nested(depth: int) -> t.Any:
    value: t.Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("kind", ["lists", "objects", "a reason holding one"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_dead_letter_attribute_nested_too_deep_is_shown_as_unreadable(
    client: FlaskClient, sqs: SQSClient, queues: Queues, depth: int, kind: str
) -> None:
    message_id = dead_letter(
        sqs, queues.dead_letters, payload={"n": 1}, reason_text=nested_text(depth, kind)
    )
    fine = dead_letter(
        sqs, queues.dead_letters, payload={"n": 2}, error="card declined"
    )

    page = client.get(PATH)
    data = client.get(PATH, headers=JSON)

    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert (
        "unreadable: the dead_letter attribute is nested more than 100 levels deep"
        in text
    )
    assert "card declined" in text
    assert data.status_code == 200
    letters = {x["message_id"]: x for x in data.get_json()["dead_letters"]}
    assert letters[message_id]["reason"] == {
        "unreadable": "the dead_letter attribute is nested more than 100 levels deep"
    }
    assert letters[message_id]["preview"] == '{\n  "n": 1\n}'
    assert letters[fine]["reason"]["error"] == "card declined"


@pytest.mark.parametrize("depth", [300, *DEPTHS])
def test_a_payload_nested_too_deep_is_shown_as_unreadable(
    client: FlaskClient, sqs: SQSClient, queues: Queues, depth: int
) -> None:
    body = '{"job_type": "deep", "payload": {"a": ' + nested_text(depth, "lists") + "}}"
    message_id = dead_letter(sqs, queues.dead_letters, body=body)

    page = client.get(PATH)
    data = client.get(PATH, headers=JSON)

    assert page.status_code == 200
    assert data.status_code == 200
    [letter] = data.get_json()["dead_letters"]
    assert letter["message_id"] == message_id
    unreadable = {"unreadable": "the payload is nested more than 100 levels deep"}
    if letter["job_type"] == "deep":
        # Decoded, then too deep to show.
        assert json.loads(letter["preview"]) == unreadable
    else:
        # Deeper than a body may nest: shown as the text it is, cut.
        assert depth > 300
        assert letter["job_type"] is None
        assert letter["truncated"] is (len(body) > 2000)
        assert letter["preview"] == body[:2000]


def test_values_within_the_bound_are_shown(
    client: FlaskClient, sqs: SQSClient, queues: Queues
) -> None:
    dead_letter(sqs, queues.dead_letters, payload={"a": nested(99)})

    [letter] = client.get(PATH, headers=JSON).get_json()["dead_letters"]

    assert "unreadable" not in letter["preview"]
    assert letter["preview"].startswith('{\n  "a": [\n    [\n      [')


def test_a_job_result_nested_too_deep_is_shown_as_unreadable(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, tmp_path: pathlib.Path
) -> None:
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    now = dt.datetime.now(dt.UTC)
    record_job(store, "deep-1", "report", "succeeded", now, result=nested(300))
    try:
        app = make_dashboard_app(jobs=SQSJobs(boto_client=sqs, store=store))
        client = app.test_client()

        page = client.get("/jobs/jobs/deep-1")
        data = client.get("/jobs/jobs/deep-1", headers=JSON)
        listing = client.get("/jobs/jobs", headers=JSON)
    finally:
        store.close()

    assert page.status_code == 200
    assert "the result is nested more than 100 levels deep" in page.get_data(
        as_text=True
    )
    assert data.get_json()["job"]["result"] == {
        "unreadable": "the result is nested more than 100 levels deep"
    }
    assert listing.status_code == 200


#: One of each kind of character that hides, reorders or breaks text.
INVISIBLE = {
    "\u202e": "\\u202e",  # RIGHT-TO-LEFT OVERRIDE (Cf)
    "\u2066": "\\u2066",  # LEFT-TO-RIGHT ISOLATE (Cf)
    "\u061c": "\\u061c",  # ARABIC LETTER MARK (Cf)
    "\u200b": "\\u200b",  # ZERO WIDTH SPACE (Cf)
    "\u200d": "\\u200d",  # ZERO WIDTH JOINER (Cf)
    "\ufeff": "\\ufeff",  # BYTE ORDER MARK (Cf)
    "\u00ad": "\\xad",  # SOFT HYPHEN (Cf)
    "\U000e0041": "\\U000e0041",  # TAG LATIN CAPITAL LETTER A (Cf)
    "\u2028": "\\u2028",  # LINE SEPARATOR (Zl)
    "\u2029": "\\u2029",  # PARAGRAPH SEPARATOR (Zp)
    "\x85": "\\x85",  # NEXT LINE (Cc)
    "\ue000": "\\ue000",  # private use (Co)
}


@pytest.mark.parametrize(("char", "escaped"), INVISIBLE.items())
def test_invisible_and_reordering_characters_are_shown_escaped(
    client: FlaskClient, sqs: SQSClient, queues: Queues, char: str, escaped: str
) -> None:
    text = f"invoice{char}fdp.exe"
    dead_letter(
        sqs,
        queues.dead_letters,
        job_type=text,
        payload={text: text},
        error=text,
        error_type=text,
        source_queue=text,
    )

    response = client.get(PATH)
    data = client.get(PATH, headers=JSON).get_json()

    page = response.get_data(as_text=True)
    assert char not in page
    assert page.count(f"invoice{escaped}fdp.exe") >= 6
    [letter] = data["dead_letters"]
    assert letter["job_type"] == text
    assert letter["reason"]["error"] == text


def test_a_dead_letter_queue_with_its_own_redrive_policy_is_never_peeked(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient
) -> None:
    last = create_queue(sqs, "dash-last-resort")
    dlq = create_queue(sqs, "dash-chain-dlq", dead_letter_url=last, max_receive_count=3)
    create_queue(sqs, "dash-chain", dead_letter_url=dlq, max_receive_count=1000)
    app = make_dashboard_app(
        config={"SQS_JOBS_QUEUES": {"default": {"name": "dash-chain"}}}
    )
    client = app.test_client()
    dead_letter(sqs, dlq, payload={"card": "4111-secret"})

    pages = [client.get(PATH) for _ in range(5)]
    data = client.get(PATH, headers=JSON).get_json()

    assert {page.status_code for page in pages} == {200}
    text = pages[0].get_data(as_text=True)
    assert "has a RedrivePolicy of its own" in text
    assert "received 3 time(s) on to dash-last-resort" in text
    assert 'id="show-dead-letters"' not in text
    assert 'id="redrive-all"' in text
    assert "4111-secret" not in text
    assert data["dead_letters"] == []
    assert data["peek_refused"]["own_redrive_policy"] is True
    assert (message_count(sqs, dlq), message_count(sqs, last)) == (1, 0)
    [message] = sqs.receive_message(
        QueueUrl=dlq, MessageSystemAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
