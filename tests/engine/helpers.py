"""Helpers for the engine's unit tests: a spying client, a threaded worker, logs."""

from __future__ import annotations

import collections.abc as cabc
import threading
import time
import typing as t

from botocore.exceptions import ClientError
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from structlog.typing import EventDict

#: Upper bound for every wait on an Event, Barrier or thread in these tests; a
#: correct engine is done long before.
WAIT = 10.0

#: A handler's payload.
Payload: t.TypeAlias = dict[str, t.Any]


#: Codes the spy answers with HTTP 5xx (SQS may have applied the request);
#: any other code is a 4xx, a refusal.
SERVER_ERROR_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable"}
)


class SpyClient:
    """Stands in for a boto3 SQS client: records calls, can make some fail.

    Every call is passed to the real client unless its operation is listed in
    :attr:`failing`, in which case a botocore ``ClientError`` with that code is
    raised instead. :attr:`before` and :attr:`after` hooks run around a call.
    """

    def __init__(self, client: SQSClient) -> None:
        self.wrapped = client
        self.calls: list[tuple[str, dict[str, t.Any]]] = []
        #: operation -> AWS error code to raise instead of calling SQS.
        self.failing: dict[str, str] = {}
        self.before: dict[str, cabc.Callable[[dict[str, t.Any]], None]] = {}
        self.after: dict[str, cabc.Callable[[dict[str, t.Any], t.Any], None]] = {}

    @property
    def client(self) -> SQSClient:
        return t.cast("SQSClient", self)

    def calls_to(self, operation: str) -> list[dict[str, t.Any]]:
        return [kwargs for name, kwargs in list(self.calls) if name == operation]

    def __getattr__(self, name: str) -> t.Any:
        method = getattr(self.wrapped, name)
        if name.startswith("_") or not callable(method):
            return method

        def call(**kwargs: t.Any) -> t.Any:
            self.calls.append((name, kwargs))
            before = self.before.get(name)
            if before is not None:
                before(kwargs)
            result: t.Any = None
            try:
                code = self.failing.get(name)
                if code is not None:
                    status = 500 if code in SERVER_ERROR_CODES else 400
                    answer: t.Any = {
                        "Error": {"Code": code, "Message": f"{name} refused"},
                        "ResponseMetadata": {"HTTPStatusCode": status},
                    }
                    raise ClientError(answer, name)
                result = method(**kwargs)
                return result
            finally:
                after = self.after.get(name)
                if after is not None:
                    after(kwargs, result)

        return call


def visibility_changes(spy: SpyClient) -> list[int]:
    """Every VisibilityTimeout asked for through ``spy``, single or batched."""
    seconds = [
        call["VisibilityTimeout"] for call in spy.calls_to("change_message_visibility")
    ]
    for batch in spy.calls_to("change_message_visibility_batch"):
        seconds.extend(entry["VisibilityTimeout"] for entry in batch["Entries"])
    return seconds


def one_queue_group(client: SQSClient, url: str, **options: t.Any) -> QueueGroup:
    """A group of one queue named ``jobs``."""
    return QueueGroup({"jobs": {"queue": SqsQueue(url, boto_client=client, **options)}})


class WorkerThread:
    """Run a worker's ``run()`` in a thread, for tests that watch it from outside."""

    def __init__(self, worker: JobWorker) -> None:
        self.worker = worker
        self.status: int | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.status = self.worker.run()

    def join(self, timeout: float = WAIT) -> int:
        """Wait for ``run()`` to return and give its exit status."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            # Do not leave it running into the next test.
            self.worker.request_stop()
            self._thread.join(timeout)
            raise AssertionError("the worker did not stop in time")
        assert self.status is not None, "run() raised"
        return self.status


def events(logs: list[EventDict], name: str) -> list[EventDict]:
    """The captured log entries whose event is ``name``."""
    return [entry for entry in list(logs) if entry.get("event") == name]


def only_event(logs: list[EventDict], name: str) -> EventDict:
    """The one captured log entry whose event is ``name``."""
    found = events(logs, name)
    assert len(found) == 1, f"expected one {name!r}, got {found!r}"
    return found[0]


def poll_until(predicate: cabc.Callable[[], bool], timeout: float = WAIT) -> bool:
    """Check ``predicate`` every 20 ms until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
