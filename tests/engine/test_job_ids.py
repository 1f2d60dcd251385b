"""Job ids: set at enqueue, read by the worker, kept across every re-send."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
import types
import typing as t

import pytest
from flask_sqs_jobs import current_job
from flask_sqs_jobs import Job
from flask_sqs_jobs import JobMiddleware
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs.engine import Hooks
from flask_sqs_jobs.engine.ops._inspection import dead_letter_queue
from flask_sqs_jobs.engine.ops._inspection import redrive
from flask_sqs_jobs.engine.worker import _delivery

from tests.engine.helpers import events
from tests.engine.helpers import one_queue_group
from tests.engine.helpers import only_event
from tests.engine.helpers import Payload
from tests.engine.helpers import SpyClient
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    import collections.abc as cabc

    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

RANDOM_ID = re.compile(r"[0-9a-f]{32}")


def run_once(
    client: SQSClient, url: str, handlers: dict[str, t.Any], **options: t.Any
) -> None:
    group = one_queue_group(client, url, **options)
    JobWorker(group, handlers, stop_after(1), idle_wait_seconds=0).run()


def sent_job_id(sqs: SQSClient, url: str) -> object:
    [message] = visible_messages(sqs, url)
    return json.loads(message["Body"]).get("job_id")


def recording_job_id(seen: list[str | None]) -> cabc.Callable[[Payload], None]:
    def handler(payload: Payload) -> None:
        seen.append(current_job.job_id)

    return handler


# -- enqueue ------------------------------------------------------------------


def test_enqueue_sets_a_random_job_id_in_the_body_and_on_job_enqueued(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = one_queue_group(sqs, queue_url)

    message_id = group.enqueue("jobs", "ping", {})

    job_id = sent_job_id(sqs, queue_url)
    assert isinstance(job_id, str)
    assert RANDOM_ID.fullmatch(job_id)
    assert job_id != message_id
    enqueued = only_event(logs, "job_enqueued")
    assert enqueued["job_id"] == job_id
    assert enqueued["message_id"] == message_id


def test_each_enqueue_gets_a_job_id_of_its_own(sqs: SQSClient, queue_url: str) -> None:
    group = one_queue_group(sqs, queue_url)
    for _ in range(3):
        group.enqueue("jobs", "ping", {})

    ids = {json.loads(m["Body"])["job_id"] for m in visible_messages(sqs, queue_url)}
    assert len(ids) == 3


@pytest.mark.parametrize("job_id", ["order-42:charge", "a", "A.b_c-9:x", "x" * 128])
def test_the_callers_job_id_is_sent(
    sqs: SQSClient, queue_url: str, job_id: str
) -> None:
    one_queue_group(sqs, queue_url).enqueue("jobs", "ping", {}, job_id=job_id)

    assert sent_job_id(sqs, queue_url) == job_id


@pytest.mark.parametrize(
    ("job_id", "error"),
    [
        ("", ValueError),
        ("x" * 129, ValueError),
        ("a b", ValueError),
        ("a/b", ValueError),
        ("é", ValueError),
        ("line\n", ValueError),
        (42, TypeError),
        (b"abc", TypeError),
    ],
)
def test_an_invalid_job_id_is_refused_and_nothing_sent(
    sqs: SQSClient, queue_url: str, job_id: object, error: type[Exception]
) -> None:
    spy = SpyClient(sqs)
    group = one_queue_group(spy.client, queue_url)

    with pytest.raises(error, match="job_id"):
        group.enqueue("jobs", "ping", {}, job_id=t.cast(t.Any, job_id))
    with pytest.raises(error, match=r"jobs\[1\]: job_id"):
        group.enqueue_many(
            "jobs", [("ping", {}), {"job_type": "ping", "job_id": job_id}]
        )

    assert spy.calls_to("send_message") == []
    assert spy.calls_to("send_message_batch") == []
    assert message_count(sqs, queue_url) == 0


def test_enqueue_many_takes_a_job_id_per_job_and_sets_the_others(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    group = one_queue_group(sqs, queue_url)

    ids = group.enqueue_many(
        "jobs",
        [
            {"job_type": "ping", "payload": {"n": 0}, "job_id": "mine-0"},
            ("ping", {"n": 1}),
            {"job_type": "ping", "payload": {"n": 2}},
        ],
    )

    sent = {
        m["MessageId"]: json.loads(m["Body"]) for m in visible_messages(sqs, queue_url)
    }
    job_ids = [sent[message_id]["job_id"] for message_id in ids]
    assert job_ids[0] == "mine-0"
    assert all(RANDOM_ID.fullmatch(job_id) for job_id in job_ids[1:])
    assert job_ids[1] != job_ids[2]
    assert [e["job_id"] for e in events(logs, "job_enqueued")] == job_ids


class _Seen(JobMiddleware):
    def __init__(self) -> None:
        self.produced: list[str | None] = []

    def produce(self, job: Job, call_next: cabc.Callable[[Job], str]) -> str:
        self.produced.append(job.job_id)
        return call_next(job)


@pytest.mark.parametrize("many", [False, True])
def test_produce_middleware_sees_the_job_id_that_is_sent(
    sqs: SQSClient, queue_url: str, many: bool
) -> None:
    seen = _Seen()
    group = QueueGroup(
        {"jobs": {"queue": one_queue_group(sqs, queue_url).queue("jobs")}},
        middleware=[seen],
    )

    if many:
        group.enqueue_many("jobs", [{"job_type": "ping", "job_id": "j-1"}])
    else:
        group.enqueue("jobs", "ping", {}, job_id="j-1")

    assert seen.produced == ["j-1"]
    assert sent_job_id(sqs, queue_url) == "j-1"


def test_job_keeps_its_positional_fields() -> None:
    job = Job("ping", {}, "jobs")

    assert job.job_id is None
    assert Job(job_type="ping", payload={}, queue="jobs", job_id="j").job_id == "j"


# -- the worker ---------------------------------------------------------------


def test_the_handler_and_every_job_line_see_the_enqueued_job_id(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    one_queue_group(sqs, queue_url).enqueue("jobs", "ping", {}, job_id="order-7")
    seen: list[str | None] = []

    run_once(sqs, queue_url, {"ping": recording_job_id(seen)})

    assert seen == ["order-7"]
    assert only_event(logs, "job_started")["job_id"] == "order-7"
    assert only_event(logs, "job_finished")["job_id"] == "order-7"


def test_consume_middleware_and_hooks_see_the_job_id(
    sqs: SQSClient, queue_url: str
) -> None:
    consumed: list[str | None] = []
    hooked: list[tuple[str, str | None]] = []

    class Consume(JobMiddleware):
        def consume(self, job: Job, call_next: cabc.Callable[[Job], None]) -> None:
            consumed.append(job.job_id)
            call_next(job)

    class Recording(Hooks):
        def job_started(self, job: Job) -> None:
            hooked.append(("started", job.job_id))

        def job_finished(self, job: Job, *args: t.Any, **kwargs: t.Any) -> None:
            hooked.append(("finished", job.job_id))

    queue = one_queue_group(sqs, queue_url).queue("jobs")
    group = QueueGroup(
        {"jobs": {"queue": queue}}, middleware=[Consume()], hooks=Recording()
    )
    group.enqueue("jobs", "ping", {}, job_id="j-2")

    JobWorker(group, {"ping": lambda p: None}, stop_after(1), 0).run()

    assert consumed == ["j-2"]
    assert hooked == [("started", "j-2"), ("finished", "j-2")]


def test_another_producers_message_gets_its_message_id_as_job_id(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    body = json.dumps({"job_type": "ping", "payload": {}})
    message_id = sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"]
    seen: list[str | None] = []

    run_once(sqs, queue_url, {"ping": recording_job_id(seen)})

    assert seen == [message_id]
    assert only_event(logs, "job_finished")["job_id"] == message_id
    assert events(logs, "job_id_invalid") == []


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        ("bad id\n\x1b[2J", "bad id\\n\\x1b[2J"),
        ("", ""),
        ("x" * 129, "x" * 129),
        (42, "<int>"),
        (None, None),
        ({"a": 1}, "<dict>"),
    ],
)
def test_an_invalid_job_id_in_a_message_gets_the_message_id_and_a_warning(
    sqs: SQSClient,
    queue_url: str,
    logs: list[EventDict],
    sent: object,
    logged: str | None,
) -> None:
    body = json.dumps({"job_type": "ping", "payload": {}, "job_id": sent})
    message_id = sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"]
    seen: list[str | None] = []

    run_once(sqs, queue_url, {"ping": recording_job_id(seen)})

    assert seen == [message_id]
    assert only_event(logs, "job_finished")["job_id"] == message_id
    if logged is None:  # null: as if there were none
        assert events(logs, "job_id_invalid") == []
        return
    warning = only_event(logs, "job_id_invalid")
    assert warning["log_level"] == "warning"
    assert warning["sent_job_id"] == logged
    assert warning["job_id"] == message_id


def test_a_job_of_an_unknown_type_is_logged_with_its_job_id(
    sqs: SQSClient, queue_url: str, logs: list[EventDict]
) -> None:
    one_queue_group(sqs, queue_url).enqueue("jobs", "nobody", {}, job_id="j-3")

    run_once(sqs, queue_url, {"ping": lambda p: None})

    assert only_event(logs, "unknown_job_type_deferred")["job_id"] == "j-3"


# -- kept across re-sends -----------------------------------------------------


class _Later(dt.datetime):
    """The clock four hours ahead: a deferred job has come due."""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> t.Self:
        return cls.fromtimestamp(time.time() + 4 * 3600, tz)


def test_a_deferred_job_keeps_its_job_id(
    sqs: SQSClient, queue_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SpyClient(sqs)
    one_queue_group(spy.client, queue_url).enqueue(
        "jobs", "report", {}, delay_seconds=3 * 3600
    )
    (enqueued,) = spy.calls_to("send_message")
    job_id = json.loads(enqueued["MessageBody"])["job_id"]
    seen: list[str | None] = []
    # Skip the wait: what SQS delivers 15 minutes later is this same body.
    sqs.send_message(QueueUrl=queue_url, MessageBody=enqueued["MessageBody"])

    run_once(spy.client, queue_url, {"report": recording_job_id(seen)})
    (_, deferred) = spy.calls_to("send_message")
    assert deferred["MessageBody"] == enqueued["MessageBody"]
    assert seen == []

    sqs.send_message(QueueUrl=queue_url, MessageBody=deferred["MessageBody"])
    monkeypatch.setattr(
        _delivery, "dt", types.SimpleNamespace(datetime=_Later, UTC=dt.UTC)
    )
    run_once(sqs, queue_url, {"report": recording_job_id(seen)})

    assert seen == [job_id]


def test_a_dead_lettered_and_redriven_job_keeps_its_job_id(
    sqs: SQSClient, logs: list[EventDict]
) -> None:
    dlq = create_queue(sqs, "jobs-dlq")
    url = create_queue(sqs, "jobs", dead_letter_url=dlq, max_receive_count=1)
    group = one_queue_group(sqs, url, visibility_timeout=0)
    group.enqueue("jobs", "charge", {})
    job_id = only_event(logs, "job_enqueued")["job_id"]
    seen: list[str | None] = []
    messages: list[str | None] = []

    def charge(payload: Payload) -> None:
        seen.append(current_job.job_id)
        messages.append(current_job.message_id)
        if len(seen) == 1:
            raise RuntimeError("card declined")

    JobWorker(group, {"charge": charge}, stop_after(1), 0).run()
    [letter] = visible_messages(sqs, dlq)
    assert json.loads(letter["Body"])["job_id"] == job_id

    queue = group.queue("jobs")
    dead_letters = dead_letter_queue(queue)
    assert dead_letters is not None
    assert redrive(dead_letters, queue).moved == 1
    JobWorker(group, {"charge": charge}, stop_after(1), 0).run()

    assert seen == [job_id, job_id]
    assert messages[0] != messages[1]
    assert message_count(sqs, url) == 0
