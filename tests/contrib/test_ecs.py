"""EcsDrainMiddleware, against botocore's Stubber and a fake task metadata endpoint."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import http.server
import json
import threading
import typing as t

import boto3
import pytest
from botocore.stub import Stubber
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.contrib.ecs import EcsDrainMiddleware
from flask_sqs_jobs.contrib.ecs import METADATA_URI_ENV

from tests.support import create_queue
from tests.support import message_count

if t.TYPE_CHECKING:
    from mypy_boto3_ecs.client import ECSClient
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

#: Upper bound for waiting on the worker thread; it is done long before.
WAIT = 10.0
CLUSTER = "arn:aws:ecs:us-east-1:123456789012:cluster/prod"
FAMILY = "billing-worker"
OWN_TASK = "arn:aws:ecs:us-east-1:123456789012:task/prod/own"
SERVICE = "service:billing-worker"
#: A paused ``poll`` called outside a worker sleeps this long.
PAUSE = 0.001


class MetadataServer(http.server.ThreadingHTTPServer):
    """Serves ``<uri>/task`` like the ECS task metadata endpoint (version 4)."""

    status = 200
    task: t.ClassVar[dict[str, object]] = {
        "Cluster": CLUSTER,
        "TaskARN": OWN_TASK,
        "Family": FAMILY,
        "Revision": "7",
        "DesiredStatus": "RUNNING",
        "KnownStatus": "RUNNING",
    }
    requests = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v4/own-container"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: MetadataServer

    def do_GET(self) -> None:
        self.server.requests += 1
        found = self.path == "/v4/own-container/task"
        status = self.server.status if found else 404
        body = json.dumps(self.server.task).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: t.Any) -> None:
        pass


@pytest.fixture
def metadata() -> cabc.Iterator[MetadataServer]:
    server = MetadataServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


@pytest.fixture
def ecs() -> cabc.Iterator[tuple[ECSClient, Stubber]]:
    client = boto3.client("ecs", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@dataclasses.dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def task(name: str, revision: int, status: str = "RUNNING", **extra: str) -> t.Any:
    return {
        "taskArn": f"arn:aws:ecs:us-east-1:123456789012:task/prod/{name}",
        "taskDefinitionArn": (
            f"arn:aws:ecs:us-east-1:123456789012:task-definition/{FAMILY}:{revision}"
        ),
        "lastStatus": status,
        "group": SERVICE,
        **extra,
    }


def expect_check(stubber: Stubber, *others: t.Any) -> None:
    """Stub one check: ListTasks, then DescribeTasks of our task and ``others``."""
    tasks = [task("own", 7), *others]
    stubber.add_response(
        "list_tasks",
        {"taskArns": [d["taskArn"] for d in tasks]},
        {"cluster": CLUSTER, "family": FAMILY, "desiredStatus": "RUNNING"},
    )
    stubber.add_response(
        "describe_tasks",
        {"tasks": tasks},
        {"cluster": CLUSTER, "tasks": [d["taskArn"] for d in tasks]},
    )


class Polls:
    """A ``call_next`` for ``poll`` that counts the cycles let through."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def drain(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, clock: Clock
) -> EcsDrainMiddleware:
    return EcsDrainMiddleware(
        check_interval_seconds=30,
        pause_seconds=PAUSE,
        ecs_client=ecs[0],
        metadata_uri=metadata.uri,
        clock=clock,
    )


def events(logs: list[EventDict], prefix: str) -> list[EventDict]:
    return [e for e in logs if e["event"].startswith(prefix)]


def test_polls_while_no_newer_revision_runs(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, logs: list[EventDict]
) -> None:
    expect_check(ecs[1], task("peer", 7), task("older", 6))
    polls = Polls()

    drain(ecs, metadata, Clock()).poll(polls)

    assert polls.count == 1
    assert events(logs, "ecs_drain") == []


def test_pauses_once_a_newer_revision_runs(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, logs: list[EventDict]
) -> None:
    expect_check(ecs[1], task("new", 8))
    polls = Polls()

    drain(ecs, metadata, Clock()).poll(polls)

    assert polls.count == 0
    [paused] = events(logs, "ecs_drain")
    assert paused["event"] == "ecs_drain_paused"
    assert paused["newer_revision"] == 8
    assert (paused["family"], paused["revision"]) == (FAMILY, 7)


@pytest.mark.parametrize(
    "newer",
    [
        task("starting", 8, status="PENDING"),
        task("other-service", 8, group="service:reports"),
        task("one-off", 8, group="family:billing-worker"),
    ],
    ids=["still-starting", "other-service", "one-off-task"],
)
def test_only_a_running_task_of_the_same_group_counts(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, newer: t.Any
) -> None:
    expect_check(ecs[1], newer)
    polls = Polls()

    drain(ecs, metadata, Clock()).poll(polls)

    assert polls.count == 1


def test_the_answer_is_cached_for_the_check_interval(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer
) -> None:
    clock = Clock()
    middleware = drain(ecs, metadata, clock)
    polls = Polls()
    expect_check(ecs[1])

    middleware.poll(polls)
    clock.now += 29.9
    middleware.poll(polls)
    ecs[1].assert_no_pending_responses()
    expect_check(ecs[1], task("new", 8))
    clock.now += 0.1
    middleware.poll(polls)

    assert polls.count == 2
    assert metadata.requests == 1


def test_resumes_when_the_newer_generation_stops(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, logs: list[EventDict]
) -> None:
    clock = Clock()
    middleware = drain(ecs, metadata, clock)
    polls = Polls()
    expect_check(ecs[1], task("new", 8))
    expect_check(ecs[1], task("new", 8, status="STOPPED"))

    middleware.poll(polls)
    clock.now += 30
    middleware.poll(polls)

    assert polls.count == 1
    assert [e["event"] for e in events(logs, "ecs_drain")] == [
        "ecs_drain_paused",
        "ecs_drain_resumed",
    ]


def test_reads_the_metadata_endpoint_from_the_environment(
    ecs: tuple[ECSClient, Stubber],
    metadata: MetadataServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(METADATA_URI_ENV, metadata.uri)
    expect_check(ecs[1], task("new", 8))
    polls = Polls()

    EcsDrainMiddleware(ecs_client=ecs[0], pause_seconds=PAUSE).poll(polls)

    assert polls.count == 0


def test_outside_ecs_it_keeps_polling_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, logs: list[EventDict]
) -> None:
    monkeypatch.delenv(METADATA_URI_ENV, raising=False)
    clock = Clock()
    middleware = EcsDrainMiddleware(
        check_interval_seconds=30, pause_seconds=PAUSE, clock=clock
    )
    polls = Polls()

    for _ in range(3):
        middleware.poll(polls)
        clock.now += 30

    assert polls.count == 3
    [warning] = events(logs, "ecs_drain")
    assert warning["event"] == "ecs_drain_unavailable"
    assert warning["log_level"] == "warning"
    assert METADATA_URI_ENV in warning["reason"]


def test_api_errors_fail_open_and_warn_once_until_a_check_succeeds(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, logs: list[EventDict]
) -> None:
    clock = Clock()
    middleware = drain(ecs, metadata, clock)
    polls = Polls()
    expect_check(ecs[1], task("new", 8))
    ecs[1].add_client_error("list_tasks", "AccessDeniedException")
    ecs[1].add_client_error("list_tasks", "ThrottlingException")
    expect_check(ecs[1])
    ecs[1].add_client_error("list_tasks", "AccessDeniedException")

    for _ in range(5):
        middleware.poll(polls)
        clock.now += 30

    assert polls.count == 4
    assert [e["event"] for e in events(logs, "ecs_drain")] == [
        "ecs_drain_paused",
        "ecs_drain_unavailable",
        "ecs_drain_resumed",
        "ecs_drain_unavailable",
    ]


def test_a_metadata_error_fails_open(
    ecs: tuple[ECSClient, Stubber], metadata: MetadataServer, logs: list[EventDict]
) -> None:
    metadata.status = 500
    polls = Polls()

    drain(ecs, metadata, Clock()).poll(polls)

    assert polls.count == 1
    [warning] = events(logs, "ecs_drain")
    assert warning["event"] == "ecs_drain_unavailable"
    assert "500" in warning["reason"]


def test_intervals_must_make_sense() -> None:
    with pytest.raises(ValueError, match="pause_seconds must be > 0"):
        EcsDrainMiddleware(pause_seconds=0)
    with pytest.raises(ValueError, match="check_interval_seconds must be >= 0"):
        EcsDrainMiddleware(check_interval_seconds=-1)


def test_a_paused_worker_receives_nothing_and_stops_at_once(
    sqs: SQSClient, ecs: tuple[ECSClient, Stubber], metadata: MetadataServer
) -> None:
    client, stubber = ecs
    expect_check(stubber, task("new", 8))
    checked = threading.Event()
    client.meta.events.register(
        "after-call.ecs.DescribeTasks", lambda **kwargs: checked.set()
    )
    url = create_queue(sqs, "jobs")
    middleware = EcsDrainMiddleware(
        pause_seconds=600, ecs_client=client, metadata_uri=metadata.uri
    )
    group = QueueGroup(
        {"jobs": {"queue": SqsQueue(url, boto_client=sqs)}}, middleware=[middleware]
    )
    group.enqueue("jobs", "ping", {})
    ran: list[object] = []
    worker = JobWorker(group, {"ping": ran.append}, idle_wait_seconds=0)
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(worker.run()))

    thread.start()
    assert checked.wait(WAIT)
    worker.request_stop()
    thread.join(WAIT)

    assert not thread.is_alive()
    assert status == [0]
    assert ran == []
    assert message_count(sqs, url) == 1


def test_the_ecs_client_may_be_passed_positionally(
    ecs: tuple[ECSClient, Stubber],
    metadata: MetadataServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(METADATA_URI_ENV, metadata.uri)
    expect_check(ecs[1], task("new", 8))
    polls = Polls()

    EcsDrainMiddleware(ecs[0], pause_seconds=PAUSE).poll(polls)

    assert polls.count == 0
    ecs[1].assert_no_pending_responses()


@pytest.mark.parametrize("client", [30, "ecs", object()])
def test_something_other_than_an_ecs_client_is_refused(client: t.Any) -> None:
    with pytest.raises(TypeError, match=r'boto3\.client\("ecs"\)'):
        EcsDrainMiddleware(client)


def test_the_ecs_client_given_twice_is_a_type_error(
    ecs: tuple[ECSClient, Stubber],
) -> None:
    kwargs: dict[str, t.Any] = {"ecs_client": ecs[0]}
    with pytest.raises(TypeError, match="multiple values"):
        EcsDrainMiddleware(ecs[0], **kwargs)
