"""A filter of a queue's dead letters: by job type and by the reason's error type.

The dead-letters page shows the peeked letters that match, and acts (redrive,
delete) on every letter that matches, after a confirmation that counts them.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

from ..engine.ops import describe_dead_letter

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

#: The longest filter value taken (a job type's length in the records).
MAX_FILTER_LENGTH = 255


class BadLetterFilter(ValueError):
    """A filter value is wrong; the text says which."""


@dataclasses.dataclass(frozen=True)
class LetterFilter:
    """Dead letters of ``job_type`` whose reason's ``error_type`` is
    ``error_type``; a None part matches any letter."""

    job_type: str | None = None
    error_type: str | None = None

    @property
    def any(self) -> bool:
        """Whether it filters at all."""
        return self.job_type is not None or self.error_type is not None

    def matches(self, message: MessageTypeDef) -> bool:
        """Whether a received dead letter matches."""
        letter = describe_dead_letter(message)
        return self.matches_letter(letter["job_type"], letter["dead_letter"])

    def matches_letter(self, job_type: object, reason: object) -> bool:
        """Whether a letter of ``job_type`` with ``reason`` (its ``dead_letter``
        attribute, decoded) matches."""
        if self.job_type is not None and job_type != self.job_type:
            return False
        if self.error_type is None:
            return True
        return isinstance(reason, dict) and reason.get("error_type") == self.error_type

    def as_dict(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


def read_letter_filter(values: cabc.Mapping[str, str]) -> LetterFilter:
    """The ``job_type`` and ``error_type`` of a query string or form; empty is none.

    :raises BadLetterFilter: a value is longer than :data:`MAX_FILTER_LENGTH`.
    """
    found: dict[str, str | None] = {}
    for name in ("job_type", "error_type"):
        value = (values.get(name) or "").strip()
        if len(value) > MAX_FILTER_LENGTH:
            raise BadLetterFilter(f"{name} is longer than {MAX_FILTER_LENGTH}")
        found[name] = value or None
    return LetterFilter(**found)
