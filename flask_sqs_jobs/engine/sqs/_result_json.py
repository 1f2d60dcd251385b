"""A handler's result as the JSON a store keeps: with a job's record or its key.

A result is kept when it is JSON, nested at most :data:`MAX_JSON_DEPTH` levels
deep and at most :data:`MAX_RESULT_BYTES` encoded; anything else is refused
with the reason, never with a ``RecursionError``, so a job whose result cannot
be kept still succeeds, once.
"""

from __future__ import annotations

import typing as t

from ..model import MAX_RESULT_BYTES
from ._wire import dump_json
from ._wire import loads_bounded
from ._wire import MAX_JSON_DEPTH
from ._wire import nested_deeper_than

#: Why a result nested too deeply is not kept.
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"


class ResultNotKept(ValueError):
    """A result that cannot be kept; ``str()`` says why, for a reader."""

    def __init__(self, kind: str, reason: str, *, size: int | None = None) -> None:
        super().__init__(reason)
        #: Why, in two words: ``not JSON``, ``too deep`` or ``too large``.
        self.kind = kind
        #: Its JSON's size in bytes, when it was too large.
        self.size = size


def result_json(result: object) -> str:
    """``result`` as compact JSON (escaped where SQL and DynamoDB need it).

    :raises ResultNotKept: it is not JSON, too deep or too large.
    """
    try:
        text = dump_json(result)
    except RecursionError:
        raise ResultNotKept("too deep", TOO_DEEP) from None
    except (TypeError, ValueError) as exc:
        raise ResultNotKept("not JSON", f"not JSON: {exc}") from None
    if nested_deeper_than(text, MAX_JSON_DEPTH):
        raise ResultNotKept("too deep", TOO_DEEP)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_RESULT_BYTES:
        raise ResultNotKept(
            "too large",
            f"its JSON is {size:,} bytes, larger than the {MAX_RESULT_BYTES:,} kept",
            size=size,
        )
    return text


def read_result(text: str | None) -> t.Any:
    """A kept result's value; None for none, or for text no store should hold
    (written by something else, too deep to decode)."""
    if text is None:
        return None
    try:
        return loads_bounded(text)
    except ValueError:
        return None
