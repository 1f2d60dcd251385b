"""Unique jobs in an app: its queue group takes their keys in the app's store,
and its hooks free them.

Both parts share one :class:`~flask_sqs_jobs.engine.unique.UniqueKeys` per
store, made on first use. Without a store nothing is added: a unique enqueue
then raises the ``RuntimeError`` that names ``SQS_JOBS_STORE_URL``.
"""

from __future__ import annotations

import contextlib
import weakref

from ..engine import QueueGroup
from ..engine.model import Hooks
from ..engine.model import MultiHooks
from ..engine.model import report_error
from ..engine.unique import UniqueKeys
from ..engine.unique import UniqueRelease
from ..engine.unique import use_unique_keys
from ..store.model import JobStore

_keys: weakref.WeakKeyDictionary[JobStore, UniqueKeys] = weakref.WeakKeyDictionary()


def keys_of(store: JobStore) -> UniqueKeys:
    """``store.unique_keys()``, made once per store."""
    keys = _keys.get(store)
    if keys is None:
        keys = _keys.setdefault(store, store.unique_keys())
    return keys


def with_unique_release(
    hooks: Hooks, store: JobStore | None, *, synchronous: bool = False
) -> Hooks:
    """``hooks``, plus the release of unique jobs' keys when there is a store.

    A failed release reaches ``hooks``' ``worker_error`` with kind ``"store"``.
    :param synchronous: free each key in the job's thread (eager mode).
    """
    if store is None:
        return hooks

    def failed(queue: str | None, error: BaseException) -> None:
        report_error(hooks, queue, error, "store")

    release = UniqueRelease(lambda: keys_of(store), failed, synchronous=synchronous)
    return MultiHooks([hooks, release])


def give_unique_keys(group: QueueGroup, store: JobStore | None) -> QueueGroup:
    """Let ``group`` take unique jobs' keys in ``store`` (when it keeps them)."""
    if store is not None:
        # A store of its own without the part: unique enqueues say so.
        with contextlib.suppress(NotImplementedError):
            use_unique_keys(group, keys_of(store))
    return group
