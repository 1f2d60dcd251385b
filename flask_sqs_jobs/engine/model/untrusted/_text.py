"""Text from messages made safe to log: escaped, bounded, never a crash.

Anything a producer puts in a message (correlation fields, the job type, a
``run_at`` value) is untrusted. Before it reaches a log line it is escaped, so
it can neither start a line of its own, send escape sequences to a terminal
nor hide or reorder text (bidi overrides, zero-width characters), and it is
always valid UTF-8 (a lone surrogate would make a renderer that writes to
stdout raise). Correlation fields are also bounded, because
structlog keeps one ``ContextVar`` per distinct key name for the life of the
process: without a bound, messages could grow a worker's memory at will.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import re
import threading
import typing as t
import unicodedata

#: Correlation fields bound into the log context per message.
MAX_CORRELATION_FIELDS = 16
#: Characters of an untrusted string kept on a log line (before escaping).
MAX_LOGGED_TEXT = 256
#: Distinct correlation field names one worker process ever binds.
MAX_DISTINCT_FIELD_NAMES = 1024
#: Appended to a string cut at :data:`MAX_LOGGED_TEXT`.
TRUNCATION_MARK = "...(truncated)"

_FIELD_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# The candidates for escaping; _escape_char decides for each one.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# Integers beyond 64 bits are logged as (bounded) text.
_INT_RANGE = range(-(2**63), 2**64)

LogValue: t.TypeAlias = str | int | float | bool | None


def escape(text: str) -> str:
    """``text`` with every character that is invisible or acts on the text escaped.

    Escaped as in ``repr``: C0 and C1 controls, DEL, lone surrogates, and every
    other character :meth:`str.isprintable` refuses but spaces: format
    characters (category Cf: bidi overrides such as U+202E, zero-width spaces
    and joiners, U+FEFF, tag characters), line and paragraph separators (Zl,
    Zp), private-use and unassigned code points. ``"\\x1b[2J"`` becomes
    ``"\\\\x1b[2J"``, ``"\\u202e"`` becomes ``"\\\\u202e"``, a newline
    ``"\\\\n"``: readable, one line, shown as it is stored, valid UTF-8.
    Letters, marks, symbols and spaces of any script stay as they are.
    """
    if text.isprintable():
        return text
    return _NOT_PRINTABLE_ASCII.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char.isprintable() or unicodedata.category(char) == "Zs":
        return char
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def loggable_text(text: str, limit: int = MAX_LOGGED_TEXT) -> str:
    """Escape ``text`` for a log line, cut to ``limit`` characters first."""
    if len(text) <= limit:
        return escape(text)
    return escape(text[:limit]) + TRUNCATION_MARK


class FieldNames:
    """The correlation field names a process has bound, up to a limit.

    Once ``limit`` distinct names have been bound, only those names can be
    bound again: a name never seen before is refused.
    """

    def __init__(self, limit: int = MAX_DISTINCT_FIELD_NAMES) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def admit(self, name: str) -> bool:
        """Return whether ``name`` may be bound (and remember it)."""
        with self._lock:
            if name in self._seen:
                return True
            if len(self._seen) >= self.limit:
                return False
            self._seen.add(name)
            return True


#: The names this process has bound.
FIELD_NAMES = FieldNames()


@dataclasses.dataclass
class Trimmed:
    """Correlation fields fit to bind, and what had to go."""

    fields: dict[str, LogValue] = dataclasses.field(default_factory=dict)
    #: Fields that would replace one of the worker's own log keys.
    reserved: int = 0
    #: Names that are not 1-64 characters of ``A-Za-z0-9_.-``.
    invalid_names: int = 0
    #: Values that are not a string, number, boolean or null.
    invalid_values: int = 0
    #: Fields past :data:`MAX_CORRELATION_FIELDS`.
    over_limit: int = 0
    #: New names refused because the process bound its maximum already.
    unknown_names: int = 0
    #: Strings cut at :data:`MAX_LOGGED_TEXT`.
    truncated: int = 0

    @property
    def changed(self) -> bool:
        return any(
            (
                self.reserved,
                self.invalid_names,
                self.invalid_values,
                self.over_limit,
                self.unknown_names,
                self.truncated,
            )
        )

    def counts(self) -> dict[str, int]:
        """The non-zero counts, plus how many fields were kept."""
        counts = {
            name: getattr(self, name)
            for name in (
                "reserved",
                "invalid_names",
                "invalid_values",
                "over_limit",
                "unknown_names",
                "truncated",
            )
            if getattr(self, name)
        }
        return {"kept": len(self.fields), **counts}


def trim_correlation_fields(
    fields: cabc.Mapping[str, object],
    reserved: cabc.Container[str],
    names: FieldNames | None = None,
) -> Trimmed:
    """Return the fields of ``fields`` that may be bound into the log context.

    A field is dropped when its name is reserved (in ``reserved`` or starting
    with ``_``), is not 1-64 characters of ``A-Za-z0-9_.-``, or is new to a
    process that has bound :data:`MAX_DISTINCT_FIELD_NAMES` names already
    (``names``, by default :data:`FIELD_NAMES`);
    when its value is not a string, number, boolean or null; and once
    :data:`MAX_CORRELATION_FIELDS` are kept. Strings are escaped and cut at
    :data:`MAX_LOGGED_TEXT` characters.
    """
    names = FIELD_NAMES if names is None else names
    result = Trimmed()
    for name, value in fields.items():
        if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
            result.invalid_names += 1
        elif name in reserved or name.startswith("_"):
            result.reserved += 1
        elif not isinstance(value, str | int | float | None):
            result.invalid_values += 1
        elif len(result.fields) >= MAX_CORRELATION_FIELDS:
            result.over_limit += 1
        elif not names.admit(name):
            result.unknown_names += 1
        else:
            result.fields[name] = _loggable_value(value, result)
    return result


def _loggable_value(value: LogValue, result: Trimmed) -> LogValue:
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _INT_RANGE:
            return value
        # A 4,000-digit number is text as long as any string.
        value = str(value)
    if not isinstance(value, str):
        return value
    if len(value) > MAX_LOGGED_TEXT:
        result.truncated += 1
    return loggable_text(value)
