"""The transactional outbox: rows written in the caller's transaction, sent after.

Jobs come in through the engine's produce pipeline into a row sink
(``add_to_outbox``, ``add_many_to_outbox``); the outermost commit of the
caller's session hands the rows to this process's sender (``AfterCommit``,
the one after-commit helper of the project, also used by eager mode and
``enqueue_after_commit``); the sender and the relay (``OutboxRelay``) send
them through the pipeline's batch sink and report them. Rows that cannot be
sent are parked; operators list, park, retry and drop them (``list_rows``,
``park_rows``, ``retry_rows``, ``drop_rows``).
"""

from __future__ import annotations

from ._after_commit import AfterCommit
from ._after_commit import AnySession
from ._after_commit import session_of
from ._immediate import flush_all
from ._parking import being_sent
from ._parking import drop_rows
from ._parking import find_rows
from ._parking import list_rows
from ._parking import OutboxEntry
from ._parking import park_rows
from ._parking import retry_rows
from ._parking import status as outbox_status
from ._relay import OutboxRelay
from ._relay_lease import RelayLease
from ._service import bind_outbox_metrics
from ._service import outbox_relay_services
from ._write import add_many_to_outbox
from ._write import add_to_outbox
from ._write import send_through

__all__ = [
    "AfterCommit",
    "AnySession",
    "OutboxEntry",
    "OutboxRelay",
    "RelayLease",
    "add_many_to_outbox",
    "add_to_outbox",
    "being_sent",
    "bind_outbox_metrics",
    "drop_rows",
    "find_rows",
    "flush_all",
    "list_rows",
    "outbox_relay_services",
    "outbox_status",
    "park_rows",
    "retry_rows",
    "send_through",
    "session_of",
]
