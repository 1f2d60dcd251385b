"""Named queues: a group's SQS queues, their polling weights, middleware and hooks."""

from __future__ import annotations

import collections.abc as cabc
import copy
import random
import typing as t

from ..model import Hooks
from ..model import JobMiddleware
from ..model import UnknownQueueError
from ._definitions import check_definition_keys
from ._definitions import check_queue_name
from ._definitions import check_weight
from ._priorities import level_name
from ._queue import SqsQueue

_QUEUE_KEYS = frozenset({"queue", "weight"})


class NamedQueues:
    """Named SQS queues, their polling weights and the middleware around them.

    What a worker polls and a producer sends to, by logical name. The
    :class:`~flask_sqs_jobs.QueueGroup` an application builds is one; the
    worker needs no more than this.

    :param queues: logical name -> ``{"queue": SqsQueue, "weight": int}``
        (weight defaults to 1).
    :param middleware: :class:`JobMiddleware` instances, outermost first.
    :param hooks: callbacks for a framework layer (the Flask extension).
    """

    def __init__(
        self,
        queues: cabc.Mapping[str, cabc.Mapping[str, t.Any]],
        *,
        middleware: cabc.Sequence[JobMiddleware] = (),
        hooks: Hooks | None = None,
    ) -> None:
        if not isinstance(queues, cabc.Mapping):
            raise TypeError(
                "queues must be a dict of name -> definition; got"
                f" {type(queues).__name__}"
            )
        if not queues:
            raise ValueError("queues must define at least one queue")
        for name, definition in queues.items():
            check_queue_name(name)
            check_definition_keys(name, definition, _QUEUE_KEYS)
        self._queues: dict[str, SqsQueue] = {}
        self._weights: dict[str, int] = {}
        for name, definition in queues.items():
            if "queue" not in definition:
                raise ValueError(
                    f"queue {name!r}: the definition needs a 'queue' (an SqsQueue)"
                )
            queue = definition["queue"]
            if not isinstance(queue, SqsQueue):
                raise TypeError(
                    f"queue {name!r}: 'queue' must be an SqsQueue; got"
                    f" {type(queue).__name__}"
                )
            self._queues[name] = queue
            self._weights[name] = check_weight(name, definition.get("weight", 1))
        self.middleware: tuple[JobMiddleware, ...] = tuple(middleware)
        for item in self.middleware:
            if not isinstance(item, JobMiddleware):
                raise TypeError(
                    f"middleware must be JobMiddleware instances; got {item!r}"
                )
        self.hooks = hooks or Hooks()
        #: Logical queue -> its number of priority levels (each level is a
        #: queue of the group, ``<name>-p<level>``); set by ``QueueGroup.build``.
        self.priority_levels: dict[str, int] = {}
        #: Where buffered single enqueues go (``producing.SendBuffer``), or None.
        self.send_buffer: t.Any = None

    @classmethod
    def _of(
        cls,
        queues: dict[str, SqsQueue],
        weights: dict[str, int],
        middleware: tuple[JobMiddleware, ...],
        hooks: Hooks,
    ) -> t.Self:
        """A group of checked parts, checked no further."""
        group = cls.__new__(cls)
        NamedQueues._set_parts(group, queues, weights, middleware, hooks)
        return group

    def _set_parts(
        self,
        queues: dict[str, SqsQueue],
        weights: dict[str, int],
        middleware: tuple[JobMiddleware, ...],
        hooks: Hooks,
    ) -> None:
        self._queues = queues
        self._weights = weights
        self.middleware = middleware
        self.hooks = hooks
        self.priority_levels = {}

    # -- the queues --

    @property
    def names(self) -> tuple[str, ...]:
        """The logical queue names, in definition order."""
        return tuple(self._queues)

    def queue(self, name: str) -> SqsQueue:
        """Return the queue named ``name``.

        :raises UnknownQueueError: no such queue (a ``KeyError`` and ``ValueError``).
        """
        try:
            return self._queues[name]
        except (KeyError, TypeError):
            raise UnknownQueueError(name, self._queues) from None

    def items(self) -> tuple[tuple[str, SqsQueue], ...]:
        return tuple(self._queues.items())

    def weight(self, name: str) -> int:
        return self._weights[name]

    def subset(self, names: cabc.Iterable[str]) -> t.Self:
        """Return a group of only the named queues, sharing middleware and hooks.

        The name of a queue with priority levels stands for all its levels.
        """
        chosen = {
            level: self.queue(level) for name in names for level in self.levels_of(name)
        }
        group = copy.copy(self)
        group._queues = chosen
        group._weights = {name: self._weights[name] for name in chosen}
        return group

    def levels_of(self, name: str) -> list[str]:
        """The queues ``name`` stands for: its levels, or itself."""
        count = self.priority_levels.get(name)
        if count is None:
            return [name]
        return [level_name(name, level) for level in range(count)]

    def polling_order(self, names: cabc.Iterable[str] | None = None) -> list[str]:
        """Return the queue names in a weighted random order.

        A queue comes first with probability weight / total weight, so every
        queue is sometimes first and none is starved.
        """
        candidates = self._queues if names is None else names
        return sorted(
            candidates, key=lambda name: random.expovariate(self._weights[name])
        )
