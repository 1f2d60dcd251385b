"""Untrusted input made safe to show: text for logs, terminals and pages, deep JSON."""

from ._json import is_unreadable
from ._json import loads_shown
from ._json import shown
from ._json import UNREADABLE
from ._text import escape
from ._text import loggable_text
from ._text import trim_correlation_fields

__all__ = [
    "UNREADABLE",
    "escape",
    "is_unreadable",
    "loads_shown",
    "loggable_text",
    "shown",
    "trim_correlation_fields",
]
