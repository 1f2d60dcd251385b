"""A dead-letter queue shared by two queues: each letter goes back to its own."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask_sqs_jobs import SQSJobs

from tests.support import create_queue
from tests.support import queue_arn
from tests.support import SourceArnClient
from tests.support import visible_messages

from .conftest import csrf_token
from .conftest import dead_letter
from .conftest import JSON

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeDashboardApp


class Shared(t.NamedTuple):
    orders: str
    billing: str
    dead_letters: str


QUEUES = {"default": {"name": "dash-orders"}, "billing": {"name": "dash-billing"}}


@pytest.fixture
def shared(sqs: SQSClient) -> Shared:
    dlq = create_queue(sqs, "dash-shared-dlq")
    return Shared(
        create_queue(sqs, "dash-orders", dead_letter_url=dlq, max_receive_count=1000),
        create_queue(sqs, "dash-billing", dead_letter_url=dlq, max_receive_count=1000),
        dlq,
    )


@pytest.fixture
def arns() -> dict[str, str]:
    """MessageId -> the DeadLetterQueueSourceArn its receives report."""
    return {}


@pytest.fixture
def shared_client(
    make_dashboard_app: MakeDashboardApp, sqs: SQSClient, arns: dict[str, str]
) -> FlaskClient:
    jobs = SQSJobs(boto_client=t.cast(t.Any, SourceArnClient(sqs, arns)))
    app = make_dashboard_app(config={"SQS_JOBS_QUEUES": QUEUES}, jobs=jobs)
    return app.test_client()


def _act(
    client: FlaskClient, queue: str, scope: str, message_ids: t.Sequence[str] = ()
) -> t.Any:
    path = f"/jobs/queues/{queue}/dead-letters"
    form = {
        "csrf_token": csrf_token(client, path),
        "action": "redrive",
        "scope": scope,
        "message_id": list(message_ids),
        "confirmed": "yes",
    }
    response = client.post(path, data=form, headers=JSON)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _ns(sqs: SQSClient, url: str) -> list[int]:
    return sorted(
        json.loads(m["Body"])["payload"]["n"] for m in visible_messages(sqs, url)
    )


def _letters(sqs: SQSClient, shared: Shared) -> dict[str, str]:
    """Two letters recorded from each queue: 0, 1 from default, 10, 11 from billing."""
    return {
        **{
            f"default-{n}": dead_letter(sqs, shared.dead_letters, payload={"n": n})
            for n in (0, 1)
        },
        **{
            f"billing-{n}": dead_letter(
                sqs, shared.dead_letters, payload={"n": n}, source_queue="billing"
            )
            for n in (10, 11)
        },
    }


def test_redrive_all_sends_only_this_queues_letters_back_to_it(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    _letters(sqs, shared)

    data = _act(shared_client, "default", "all")

    assert (data["done"], data["left"]) == (2, 2)
    assert data["other_queues"] == {"billing": 2}
    assert _ns(sqs, shared.orders) == [0, 1]
    assert _ns(sqs, shared.billing) == []
    assert _ns(sqs, shared.dead_letters) == [10, 11]
    moved = _act(shared_client, "billing", "all")
    assert (moved["done"], moved["left"]) == (2, 0)
    assert "other_queues" not in moved
    assert _ns(sqs, shared.billing) == [10, 11]


def test_a_selected_letter_of_another_queue_is_left_and_reported(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    ids = _letters(sqs, shared)

    data = _act(
        shared_client, "default", "selected", [ids["default-0"], ids["billing-10"]]
    )

    assert (data["done"], data["not_found"], data["left"]) == (1, 0, 3)
    assert data["other_queues"] == {"billing": 1}
    assert _ns(sqs, shared.orders) == [0]
    assert _ns(sqs, shared.dead_letters) == [1, 10, 11]


def test_the_result_page_says_which_letters_were_left_for_which_queue(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    _letters(sqs, shared)
    path = "/jobs/queues/default/dead-letters"
    form = {
        "csrf_token": csrf_token(shared_client, path),
        "action": "redrive",
        "scope": "all",
        "confirmed": "yes",
    }

    page = shared_client.post(path, data=form).get_data(as_text=True)

    assert "Redriven: 2 dead letter(s)" in page
    assert "2 from <code>billing</code>" in page


def test_the_page_marks_each_letter_of_another_queue(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    ids = _letters(sqs, shared)

    data = shared_client.get("/jobs/queues/default/dead-letters", headers=JSON)
    page = shared_client.get("/jobs/queues/default/dead-letters").get_data(as_text=True)

    others = {
        x["message_id"]: x["other_queue"] for x in data.get_json()["dead_letters"]
    }
    assert others == {
        ids["default-0"]: None,
        ids["default-1"]: None,
        ids["billing-10"]: "billing",
        ids["billing-11"]: "billing",
    }
    assert page.count("recorded as from queue") == 2


def test_deadletterqueuesourcearn_decides_where_a_letter_goes(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared, arns: dict[str, str]
) -> None:
    """SQS's own record wins: a letter its redrive policy moved from billing stays,
    whatever its dead_letter attribute says; one it moved from orders goes."""
    from_billing = sqs.send_message(
        QueueUrl=shared.dead_letters,
        MessageBody=json.dumps({"job_type": "x", "payload": {"n": 20}}),
    )["MessageId"]
    forged = dead_letter(sqs, shared.dead_letters, payload={"n": 21})
    from_orders = dead_letter(
        sqs, shared.dead_letters, payload={"n": 22}, source_queue="billing"
    )
    arns[from_billing] = arns[forged] = queue_arn(sqs, shared.billing)
    arns[from_orders] = queue_arn(sqs, shared.orders)

    data = _act(shared_client, "default", "all")

    assert data["other_queues"] == {"dash-billing": 2}
    assert _ns(sqs, shared.orders) == [22]
    assert _ns(sqs, shared.dead_letters) == [20, 21]


def test_a_letter_that_records_no_source_goes_to_the_queue_asked_for(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    sqs.send_message(
        QueueUrl=shared.dead_letters,
        MessageBody=json.dumps({"job_type": "x", "payload": {"n": 30}}),
    )

    data = _act(shared_client, "billing", "all")

    assert (data["done"], data["left"]) == (1, 0)
    assert _ns(sqs, shared.billing) == [30]


def test_a_source_named_by_its_sqs_name_is_this_queue(
    shared_client: FlaskClient, sqs: SQSClient, shared: Shared
) -> None:
    """Another producer may record the physical name instead of the logical one."""
    dead_letter(sqs, shared.dead_letters, payload={"n": 40}, source_queue="dash-orders")

    data = _act(shared_client, "default", "all")

    assert data["done"] == 1
    assert _ns(sqs, shared.orders) == [40]
