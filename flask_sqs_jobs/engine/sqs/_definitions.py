"""Queue definitions: checked once, then carried as a typed value.

``QueueGroup.build`` and the ``SQS_JOBS_QUEUES`` setting take plain dicts
(``{"name": ..., "weight": ...}``); :func:`parse_queue_definitions` checks them
once and returns :class:`QueueDefinition` values that the rest of the code
uses without checking again.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import re
import typing as t
import urllib.parse

from ..model import MAX_QUEUE_NAME_LENGTH
from ._priorities import check_priority_levels
from ._priorities import level_name
from ._queue import check_queue_options
from ._queue import SqsQueue
from ._queue_options import DEFAULT_HEARTBEAT_FRACTION

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

DEFINITION_KEYS = frozenset(
    {
        "name",
        "url",
        "weight",
        "visibility_timeout",
        "max_runtime_seconds",
        "retry_backoff_seconds",
        "heartbeat_fraction",
        "priority_levels",
    }
)
_OPTIONS = (
    "visibility_timeout",
    "max_runtime_seconds",
    "retry_backoff_seconds",
    "heartbeat_fraction",
)


@dataclasses.dataclass(frozen=True)
class QueueDefinition:
    """One checked queue definition: exactly one of ``name`` and ``url``."""

    name: str | None
    url: str | None
    weight: int = 1
    visibility_timeout: int | None = None
    max_runtime_seconds: float = 3600
    retry_backoff_seconds: float | None = None
    heartbeat_fraction: float = DEFAULT_HEARTBEAT_FRACTION
    #: For one level of a queue with priority levels: (its queue's logical
    #: name, the level, how many levels); None for any other queue.
    level_of: tuple[str, int, int] | None = None

    @property
    def physical_name(self) -> str:
        """The SQS queue name: ``name``, or the last part of ``url``."""
        if self.name is not None:
            return self.name
        path = urllib.parse.urlsplit(str(self.url)).path.rstrip("/")
        return urllib.parse.unquote(path).rsplit("/", 1)[-1]

    def build_queue(self, boto_client: SQSClient) -> SqsQueue:
        """Return the :class:`SqsQueue`, without calling SQS."""
        options = {key: getattr(self, key) for key in _OPTIONS}
        if self.url is not None:
            return SqsQueue(self.url, boto_client=boto_client, **options)
        assert self.name is not None
        return SqsQueue.from_name(self.name, boto_client=boto_client, **options)


def parse_queue_definitions(
    queues: cabc.Mapping[str, cabc.Mapping[str, t.Any] | QueueDefinition],
) -> dict[str, QueueDefinition]:
    """Check definitions without calling SQS; already parsed ones pass as they are.

    :raises TypeError, ValueError: naming the queue and the key.
    """
    if not isinstance(queues, cabc.Mapping):
        raise TypeError(
            f"queues must be a dict of name -> definition; got {type(queues).__name__}"
        )
    if not queues:
        raise ValueError("queues must define at least one queue")
    parsed: dict[str, QueueDefinition] = {}
    for name, definition in queues.items():
        check_queue_name(name)
        if isinstance(definition, QueueDefinition):
            parsed[name] = definition
            continue
        levels = (
            definition.get("priority_levels")
            if isinstance(definition, cabc.Mapping)
            else None
        )
        if levels is None:
            parsed[name] = _parse(name, definition)
            continue
        levels = check_priority_levels(name, levels)
        checked = _parse(
            name, {k: v for k, v in definition.items() if k != "priority_levels"}
        )
        parsed.update(expand_levels(name, checked, levels))
    return parsed


#: What SQS allows in a queue name besides the ``.fifo`` suffix.
_QUEUE_NAME_CHARACTERS = re.compile(r"[A-Za-z0-9_-]*")


def add_name_prefix(
    definitions: cabc.Mapping[str, QueueDefinition], prefix: object
) -> dict[str, QueueDefinition]:
    """Return ``definitions`` with ``prefix`` before every ``name``; ``url``s stay.

    :raises TypeError, ValueError: the prefix is not a str of the characters
        SQS allows in a queue name, or makes a name longer than SQS allows.
    """
    if not isinstance(prefix, str):
        raise TypeError(
            f"must be a str such as 'staging-' (\"\" for none); got {prefix!r}"
        )
    if not _QUEUE_NAME_CHARACTERS.fullmatch(prefix):
        raise ValueError(
            "may hold only letters, digits, '-' and '_' (the characters SQS allows"
            f" in a queue name); got {prefix!r}"
        )
    prefixed = dict(definitions)
    if not prefix:
        return prefixed
    for logical, definition in definitions.items():
        if definition.name is None:
            continue
        name = prefix + definition.name
        if len(name) > MAX_QUEUE_NAME_LENGTH:
            raise ValueError(
                f"{prefix!r} makes the name of queue {logical!r} {len(name)}"
                f" characters long ({name!r}); SQS allows at most"
                f" {MAX_QUEUE_NAME_LENGTH}, .fifo included: shorten the prefix or"
                " the queue's name"
            )
        prefixed[logical] = dataclasses.replace(definition, name=name)
    return prefixed


def check_queue_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"queue names must be non-empty str; got {name!r}")


def check_weight(name: str, weight: object) -> int:
    if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0:
        raise ValueError(
            f"queue {name!r}: 'weight' must be a positive int; got {weight!r}"
        )
    return weight


def check_definition_keys(
    name: str, definition: object, allowed: frozenset[str]
) -> None:
    if not isinstance(definition, cabc.Mapping):
        raise TypeError(
            f"queue {name!r}: the definition must be a dict; got"
            f" {type(definition).__name__}"
        )
    unknown = sorted(set(definition) - allowed)
    if unknown:
        raise ValueError(
            f"queue {name!r}: unknown key(s) {unknown}; valid keys are"
            f" {sorted(allowed)}"
        )


def _parse(name: str, definition: object) -> QueueDefinition:
    check_definition_keys(name, definition, DEFINITION_KEYS)
    assert isinstance(definition, cabc.Mapping)
    if ("name" in definition) == ("url" in definition):
        raise ValueError(
            f"queue {name!r}: give exactly one of 'name' (the SQS queue name) or 'url'"
        )
    key = "name" if "name" in definition else "url"
    value = definition[key]
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"queue {name!r}: {key!r} must be a non-empty str; got {value!r}"
        )
    weight = check_weight(name, definition.get("weight", 1))
    options = {k: definition[k] for k in _OPTIONS if k in definition}
    try:
        check_queue_options(**options)
    except ValueError as exc:
        raise ValueError(f"queue {name!r}: {exc}") from None
    return QueueDefinition(
        name=value if key == "name" else None,
        url=value if key == "url" else None,
        weight=weight,
        **options,
    )


def expand_levels(
    logical: str, definition: QueueDefinition, levels: int
) -> dict[str, QueueDefinition]:
    """The per-level definitions of a queue with ``levels`` priority levels."""
    if definition.name is None:
        raise ValueError(
            f"queue {logical!r}: 'priority_levels' needs 'name', not 'url': each"
            " level is a queue of its own, named after it"
        )
    return {
        level_name(logical, level): dataclasses.replace(
            definition,
            name=level_name(definition.name, level),
            weight=definition.weight * 2 ** (levels - 1 - level),
            level_of=(logical, level, levels),
        )
        for level in range(levels)
    }


def priority_levels(
    definitions: cabc.Iterable[QueueDefinition],
) -> dict[str, int]:
    """Logical queue -> its number of levels, for the queues that have levels."""
    return {d.level_of[0]: d.level_of[2] for d in definitions if d.level_of is not None}
