"""The transactional outbox: rows written in the caller's transaction, sent after."""

from __future__ import annotations

from ._immediate import flush_all
from ._relay import OutboxRelay
from ._rows import status as outbox_status
from ._service import bind_outbox_metrics
from ._service import outbox_relay_services
from ._write import add_many_to_outbox
from ._write import add_to_outbox
from ._write import send_through

__all__ = [
    "OutboxRelay",
    "add_many_to_outbox",
    "add_to_outbox",
    "bind_outbox_metrics",
    "flush_all",
    "outbox_relay_services",
    "outbox_status",
    "send_through",
]
