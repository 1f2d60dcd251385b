"""What the produce pipeline and the worker need from a store to hold unique keys.

The engine never imports a database library: a store provides a
:class:`UniqueKeys` implementation (``store.unique_keys()``), and a queue
group is told to use it with :func:`use_unique_keys`. The produce pipeline
takes a job's key before its chain runs; the worker releases it through
:class:`~._release.UniqueRelease` when the job starts or finishes.
"""

from __future__ import annotations

import typing as t
import weakref

from ._options import FINISHED
from ._options import NEEDS_A_STORE
from ._options import STARTED


class UniqueKeys(t.Protocol):
    """Unique keys in a store, each held by one job until released or expired.

    Every method is safe to call from several processes at once: a key is
    taken by exactly one caller (a primary key or a conditional write).
    """

    def take(
        self, key: str, job_id: str, *, hold_seconds: float, session: t.Any = None
    ) -> str | None:
        """Take ``key`` for ``job_id`` for at most ``hold_seconds``.

        Returns None when the key was free (or its time had run out) and is
        now held for ``job_id``; else the job id of its holder. With
        ``session`` (a SQLAlchemy session on the store's database) the write
        joins that session's transaction: a rollback frees the key.
        """

    def release(self, key: str, job_id: str, *, session: t.Any = None) -> None:
        """Free ``key`` if ``job_id`` still holds it; another holder's is left.

        With ``session``, in that session's transaction (a job written into
        the outbox that then failed to be produced).
        """


#: The keys each queue group's unique jobs are taken in.
_keys_of: weakref.WeakKeyDictionary[object, UniqueKeys] = weakref.WeakKeyDictionary()


def use_unique_keys(group: object, keys: UniqueKeys) -> None:
    """Take the keys of unique jobs enqueued through ``group`` in ``keys``.

    The Flask extension does it for its queue group when a store is
    configured; a :class:`~flask_sqs_jobs.engine.QueueGroup` of one's own
    passes ``store.unique_keys()``.
    """
    _keys_of[group] = keys


def unique_keys_of(group: object) -> UniqueKeys:
    """The keys ``group`` takes unique jobs' keys in.

    :raises RuntimeError: none were given; the message names
        ``SQS_JOBS_STORE_URL``.
    """
    keys = _keys_of.get(group)
    if keys is None:
        raise RuntimeError(NEEDS_A_STORE)
    return keys


def received_unique(value: object) -> tuple[str | None, str | None]:
    """The ``unique`` body field as ``(key, until)``; ``(None, None)`` when absent.

    The value comes from a message and is not trusted: anything but an
    object with a string ``key`` and a known ``until`` counts as absent (a
    key that is never released expires with its ``unique_for``).
    """
    if not isinstance(value, dict):
        return None, None
    key, until = value.get("key"), value.get("until")
    if not isinstance(key, str) or not key or until not in (STARTED, FINISHED):
        return None, None
    return key, t.cast(str, until)
