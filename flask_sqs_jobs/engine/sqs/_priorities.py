"""Priority levels: a logical queue whose definition has ``"priority_levels": N``.

Such a queue is N queues, one per level: ``<name>-p0`` (the highest) to
``<name>-p{N-1}``, each on its SQS queue of the same name (``.fifo`` kept at
the end). Everything that lists queues (the worker, ``create-queues``,
``stats``, the dashboard) sees each level as a queue of its own. The worker
picks the queue of each receive at random by weight; level ``i`` weighs
``weight * 2 ** (N - 1 - i)``, so with every level backlogged level 0 is
served twice as often as level 1, level 1 twice as often as level 2, and no
level is ever starved. A job enqueued without ``priority=`` goes to level
``N // 2``.
"""

from __future__ import annotations

import collections.abc as cabc

from ..model import is_int_in

#: The most priority levels one queue may have (its lowest level weighs 1/128
#: of its highest).
MAX_PRIORITY_LEVELS = 8
_FIFO = ".fifo"


def level_name(name: str, level: int) -> str:
    """The name of ``name``'s level ``level``: ``-p<level>`` before any ``.fifo``."""
    if name.endswith(_FIFO):
        return f"{name[: -len(_FIFO)]}-p{level}{_FIFO}"
    return f"{name}-p{level}"


def check_priority_levels(queue: str, value: object) -> int:
    """A definition's ``priority_levels``: an int 2..:data:`MAX_PRIORITY_LEVELS`."""
    if not is_int_in(value, 2, MAX_PRIORITY_LEVELS):
        raise ValueError(
            f"queue {queue!r}: 'priority_levels' must be an int"
            f" 2..{MAX_PRIORITY_LEVELS} (the number of levels, 0 the highest);"
            f" got {value!r}"
        )
    return value


def priority_queue(levels: cabc.Mapping[str, int], queue: str, priority: object) -> str:
    """The queue a job enqueued on ``queue`` with ``priority`` goes to.

    :raises TypeError, ValueError: ``priority`` is no level of ``queue``.
    """
    count = levels.get(queue)
    if count is None:
        if priority is not None:
            raise ValueError(
                f"queue {queue!r} has no priority levels: give its definition"
                " 'priority_levels' (e.g. 3), or enqueue without priority="
            )
        return queue
    if priority is None:
        return level_name(queue, count // 2)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(
            f"priority must be an int level 0..{count - 1} of queue {queue!r} (0 the"
            f" highest); got {type(priority).__name__}"
        )
    if not 0 <= priority < count:
        raise ValueError(
            f"priority must be 0..{count - 1} for queue {queue!r} (0 the highest);"
            f" got {priority}"
        )
    return level_name(queue, priority)
