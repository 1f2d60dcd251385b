"""JSON from messages made safe to show: decoded and measured without recursion.

The dashboard and the operator commands print what they decode (a dead
letter's payload and reason, a job's result), and printing walks the value
recursively: ``json.dumps`` with an indent, Jinja, the dashboard's escaping. A
value nested a few hundred levels deep would make any of them raise
``RecursionError``, and one nested deeper than Python's recursion limit cannot
even be decoded. So a value is measured first, iteratively, and one nested more
than :data:`MAX_SHOWN_DEPTH` levels is shown as :func:`unreadable` with the
reason instead.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import typing as t

#: Containers nested inside one another that a shown value may hold.
MAX_SHOWN_DEPTH = 100
#: The key of the object that stands in for a value that cannot be shown.
UNREADABLE = "unreadable"
TOO_DEEP = f"nested more than {MAX_SHOWN_DEPTH} levels deep"


def unreadable(reason: str) -> dict[str, str]:
    """What is shown in place of a value that cannot be: ``{"unreadable": reason}``."""
    return {UNREADABLE: reason}


def is_unreadable(value: object) -> bool:
    """Whether ``value`` is what :func:`unreadable` returns."""
    return (
        isinstance(value, dict)
        and len(value) == 1
        and isinstance(value.get(UNREADABLE), str)
    )


def nests_deeper_than(value: object, limit: int = MAX_SHOWN_DEPTH) -> bool:
    """Whether ``value`` holds containers nested more than ``limit`` levels deep.

    ``{}`` and ``[]`` are one level, ``{"a": [1]}`` two. Walked with a stack
    of its own, so no depth makes it raise; it stops at the first container
    past ``limit``.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, cabc.Mapping):
            children: t.Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def shown(value: object, what: str = "the value") -> object:
    """``value`` itself, or :func:`unreadable` when it nests too deep to show."""
    if nests_deeper_than(value):
        return unreadable(f"{what} is {TOO_DEEP}")
    return value


def loads_shown(text: str, what: str = "the value") -> object:
    """Decode JSON ``text`` for showing: a too-deep value comes back :func:`unreadable`.

    :raises ValueError: ``text`` is not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        return unreadable(f"{what} is {TOO_DEEP}")
    return shown(value, what)
