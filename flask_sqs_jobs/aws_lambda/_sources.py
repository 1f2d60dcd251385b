"""Which configured queue an SQS record came from: its ``eventSourceARN``."""

from __future__ import annotations

import threading
import urllib.parse

import structlog

from ..engine import QueueGroup
from ..engine import SqsQueue

log = structlog.get_logger(__name__)


class UnknownEventSource(LookupError):
    """A record came from a queue that ``SQS_JOBS_QUEUES`` does not configure."""


class EventSources:
    """The app's queues by the ARN of the event source mapping's queue.

    One per execution environment; an ARN is matched once, then remembered.
    A queue matches when its name is the ARN's last part; when several
    configured queues have that name (in other accounts), the account in
    the queue's URL decides. Each queue is made ready (its visibility timeout
    and redrive policy read) the first time one of its records arrives.
    """

    def __init__(self, group: QueueGroup) -> None:
        self._group = group
        self._known: dict[str, tuple[str, SqsQueue]] = {}
        self._lock = threading.Lock()

    def queue_of(self, arn: str) -> tuple[str, SqsQueue]:
        """``(logical name, queue)`` for ``arn``.

        :raises UnknownEventSource: no configured queue is that ARN's.
        """
        found = self._known.get(arn)
        if found is None:
            with self._lock:
                found = self._known.get(arn) or self._match(arn)
                found[1].prepare()
                self._known[arn] = found
        return found

    def _match(self, arn: str) -> tuple[str, SqsQueue]:
        parts = arn.split(":")
        if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs":
            raise UnknownEventSource(
                f"flask_sqs_jobs.aws_lambda: {arn[:300]!r} is not an SQS queue ARN"
                " (arn:aws:sqs:REGION:ACCOUNT:NAME)"
            )
        account, name = parts[4], parts[5]
        named = [(n, q) for n, q in self._group.items() if q.name == name]
        if len(named) > 1:
            named = [(n, q) for n, q in named if _account_of(q.url) == account]
        if len(named) == 1:
            return named[0]
        configured = ", ".join(f"{n!r} ({q.name})" for n, q in self._group.items())
        raise UnknownEventSource(
            f"flask_sqs_jobs.aws_lambda: the event source {arn[:300]!r} is"
            f" {'none' if not named else 'more than one'} of the app's queues"
            f" ({configured}); add the queue to SQS_JOBS_QUEUES, or point the"
            " function's event source mapping at one of these"
        )


def _account_of(url: str) -> str | None:
    """The account id in a queue URL's path (``/123456789012/name``), if any."""
    segments = urllib.parse.urlsplit(url).path.strip("/").split("/")
    return segments[0] if len(segments) == 2 else None
