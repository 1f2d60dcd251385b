"""The releases of unique keys, written off the jobs' path by one thread per process.

A job hands ``(key, job_id)`` to :meth:`Releaser.submit` and goes on at once;
the thread frees what is waiting in one call per batch
(``UniqueKeys.release_many`` where the store has it). A store call on the job's
own thread would wait, in a worker of many threads, for the interpreter's lock
after its round trip; here that wait is the thread's, not the job's. A key is
therefore free moments after its job starts or finishes, not at that instant.
"""

from __future__ import annotations

import atexit
import collections.abc as cabc
import os
import threading
import time
import typing as t
import weakref

if t.TYPE_CHECKING:
    from ._keys import UniqueKeys

#: Releases per store call at most.
BATCH_SIZE = 100
#: How long :meth:`Releaser.flush` waits at the worker's stop or the process's exit.
FLUSH_SECONDS = 5.0

_releasers: weakref.WeakSet[Releaser] = weakref.WeakSet()


class Releaser:
    """Free unique keys from one thread, in batches.

    :param keys: makes the store's keys (called on the thread, per batch).
    :param on_error: called with a failed batch's error on the thread; the
        keys then expire with their ``unique_for``. It must not raise.
    :param synchronous: free each key at once in the caller's thread
        (eager mode: a test sees the key free when ``enqueue`` returns).

    :meth:`submit` and :meth:`flush` may be called from any thread; the
    pending list and its condition are this object's, made anew in a forked
    child (the thread does not survive a fork).
    """

    def __init__(
        self,
        keys: cabc.Callable[[], UniqueKeys],
        on_error: cabc.Callable[[BaseException], None],
        *,
        synchronous: bool = False,
    ) -> None:
        self._keys = keys
        self._on_error = on_error
        self._synchronous = synchronous
        self._start()
        _releasers.add(self)

    def _start(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._pending: list[tuple[str, str]] = []
        self._busy = 0
        self._thread: threading.Thread | None = None

    def submit(self, key: str, job_id: str) -> None:
        """Free ``key`` if ``job_id`` still holds it, soon."""
        if self._synchronous:
            self._release([(key, job_id)])
            return
        if self._pid != os.getpid():
            self._start()
        with self._cond:
            self._pending.append((key, job_id))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sqs-jobs-unique-release", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Wait until every key submitted so far is freed; False on timeout."""
        if self._pid != os.getpid():
            return True
        deadline = time.monotonic() + timeout
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._pending and not self._busy,
                max(0.0, deadline - time.monotonic()),
            )

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                batch = self._pending[:BATCH_SIZE]
                del self._pending[:BATCH_SIZE]
                self._busy += 1
            try:
                self._release(batch)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _release(self, batch: list[tuple[str, str]]) -> None:
        try:
            keys = self._keys()
            release_many = getattr(keys, "release_many", None)
            if release_many is not None:
                release_many(batch)
                return
            for key, job_id in batch:
                keys.release(key, job_id)
        except Exception as exc:
            self._on_error(exc)


def flush_all(timeout: float = FLUSH_SECONDS) -> bool:
    """Wait for every releaser of this process (at exit: what is left expires)."""
    deadline = time.monotonic() + timeout
    return all(
        releaser.flush(max(0.0, deadline - time.monotonic()))
        for releaser in list(_releasers)
    )


atexit.register(flush_all)
