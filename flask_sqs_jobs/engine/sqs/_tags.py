"""Job tags: a short list of short strings that a job carries in its body (``"tags"``).

A producer's ``tags=`` is checked strictly (:func:`check_tags`); a body's
``tags`` are read leniently (:func:`received_tags`): a message from another
producer that breaks the bounds keeps what fits and never fails its job.
"""

from __future__ import annotations

import collections.abc as cabc
import unicodedata

#: The body key of a job's tags.
TAGS = "tags"
#: At most this many tags per job, each at most this many characters.
MAX_TAGS = 10
MAX_TAG_LENGTH = 64


def check_tags(tags: object) -> tuple[str, ...]:
    """Return ``tags`` (None: none) as a tuple without repeats, in their order.

    :raises TypeError: not a list (or tuple) of str.
    :raises ValueError: more than :data:`MAX_TAGS`, or a tag that is empty,
        longer than :data:`MAX_TAG_LENGTH` characters or holds a control
        character.
    """
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, cabc.Sequence):
        raise TypeError(
            f"tags must be a list of str (e.g. tags=['customer:42']); got"
            f" {type(tags).__name__}"
        )
    checked: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be str; got {type(tag).__name__}")
        problem = _problem(tag)
        if problem is not None:
            raise ValueError(f"tag {tag[:MAX_TAG_LENGTH]!r} {problem}")
        checked.setdefault(tag)
    if len(checked) > MAX_TAGS:
        raise ValueError(
            f"a job has at most {MAX_TAGS} tags; got {len(checked)}. Keep the"
            " details in the payload and tag what you search by"
        )
    return tuple(checked)


def received_tags(value: object) -> tuple[str, ...]:
    """A body's ``tags``: the valid ones among the first :data:`MAX_TAGS`."""
    if not isinstance(value, list):
        return ()
    kept: dict[str, None] = {}
    for tag in value[:MAX_TAGS]:
        if isinstance(tag, str) and _problem(tag) is None:
            kept.setdefault(tag)
    return tuple(kept)


def _problem(tag: str) -> str | None:
    if not tag:
        return "is empty; a tag is 1 to 64 characters"
    if len(tag) > MAX_TAG_LENGTH:
        return f"is longer than {MAX_TAG_LENGTH} characters"
    if any(unicodedata.category(char).startswith("C") for char in tag):
        return "holds a control or unassigned character"
    return None
