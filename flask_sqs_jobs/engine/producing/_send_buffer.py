"""Buffered single enqueues: gathered for a few milliseconds into SendMessageBatch.

``SQS_JOBS_SEND_BUFFER_MS`` (or ``enqueue(..., buffered=True)``): a single
enqueue hands its staged message to the group's :class:`SendBuffer` and
returns its job id at once. The buffer's thread sends what it holds, per
queue, in SendMessageBatch requests of up to ten entries: as soon as a queue
has ten waiting, and when the oldest message has waited the window; so does
the end of each Flask request and the process's exit. Only when more than
:data:`_BACKLOG` wait does an enqueue send them itself, on its own thread.
A message still in the buffer when the process is killed is lost: for work
that must not be, use the outbox (``session=``).

A refused entry is logged (``job_enqueue_failed``, with SQS's code and
message) and reported to the group's error callback; the caller that
enqueued it has returned by then.
"""

from __future__ import annotations

import atexit
import collections
import collections.abc as cabc
import threading
import typing as t
import weakref

import structlog

from ._batch_sink import SqsBatchSink
from ._pipeline import deliver
from ._sinks import Sink

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues
    from ._staging import StagedMessage

log = structlog.get_logger(__name__)

#: The window ``buffered=True`` uses when ``SQS_JOBS_SEND_BUFFER_MS`` is 0.
DEFAULT_WINDOW_SECONDS = 0.01
#: Entries of one SendMessageBatch request.
_FULL = 10
#: Messages waiting at most before a caller sends them itself (so a buffer
#: whose thread cannot keep up holds a bounded number, and callers slow down).
_BACKLOG = 100
#: How many sent jobs' MessageIds are kept for a late :meth:`SendBuffer.when_sent`.
_REMEMBERED = 10_000


class SendBuffer(Sink):
    """A group's buffered single enqueues; shared by every thread.

    :param window_seconds: how long the oldest message may wait.
    :param on_error: called with ``(job_id, code, message)`` for each entry
        SQS refused (after it was logged).
    """

    enqueues = False

    def __init__(
        self,
        group: NamedQueues,
        window_seconds: float,
        on_error: cabc.Callable[[str, str, str], None] | None = None,
    ) -> None:
        self._group = group
        self.window_seconds = window_seconds
        self._on_error = on_error
        self._cond = threading.Condition()
        self._pending: list[StagedMessage] = []
        self._callbacks: dict[str, list[cabc.Callable[[str], None]]] = {}
        #: The job ids taken from the pending and not yet sent or refused.
        self._sending: set[str] = set()
        self._timer: threading.Thread | None = None
        #: The MessageIds of the last jobs sent, for a late :meth:`when_sent`.
        self._sent: collections.OrderedDict[str, str] = collections.OrderedDict()
        flush = weakref.WeakMethod(self.flush)
        atexit.register(lambda: (method := flush()) is not None and method())

    def send(self, message: StagedMessage) -> str:
        """Hold ``message``; return its job id (its MessageId comes at flush)."""
        with self._cond:
            self._pending.append(message)
            behind = len(self._pending) >= _BACKLOG
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._wait_and_flush,
                    name="sqs-jobs-send-buffer",
                    daemon=True,
                )
                self._timer.start()
            elif sum(m.queue is message.queue for m in self._pending) >= _FULL:
                # Only this message's queue can have filled a batch just now.
                self._cond.notify()
        if behind:
            # The buffer's thread cannot keep up: this caller sends too.
            self.flush()
        return t.cast(str, message.job.job_id)

    def when_sent(self, job_id: str, callback: cabc.Callable[[str], None]) -> None:
        """Call ``callback`` with the job's MessageId once it is sent (at once
        if it already was; never if it was refused)."""
        with self._cond:
            if job_id in self._sending or any(
                m.job.job_id == job_id for m in self._pending
            ):
                self._callbacks.setdefault(job_id, []).append(callback)
                return
            sent = self._sent.get(job_id)
        if sent is not None:
            callback(sent)

    def pending(self) -> int:
        """How many messages wait to be sent."""
        with self._cond:
            return len(self._pending)

    def flush(self) -> None:
        """Send everything held now, per queue, in batches of ten; in this thread."""
        with self._cond:
            held = self._take(self._pending)
        self._send(held)

    def _send(self, held: list[StagedMessage]) -> None:
        """Send ``held`` (taken from the pending under the lock, and marked as
        being sent there, so a :meth:`when_sent` meanwhile still waits)."""
        by_queue: dict[int, list[StagedMessage]] = {}
        for message in held:
            by_queue.setdefault(id(message.queue), []).append(message)
        for messages in by_queue.values():
            results = deliver(self._group, messages, SqsBatchSink(messages[0].queue))
            for message, result in zip(messages, results, strict=True):
                job_id = t.cast(str, message.job.job_id)
                callbacks = self._settled(job_id, result)
                if isinstance(result, str):
                    for callback in callbacks:
                        callback(result)
                    continue
                code, text = result or ("NotSent", "the buffer did not send it")
                log.error(
                    "job_enqueue_failed",
                    job_id=job_id,
                    job_type=message.job.job_type,
                    queue=message.job.queue,
                    error_code=code,
                    error=text,
                    via="send_buffer",
                )
                if self._on_error is not None:
                    self._on_error(job_id, code, text)

    def _settled(self, job_id: str, result: object) -> list[cabc.Callable[[str], None]]:
        """Note that ``job_id`` is no longer being sent (and its MessageId, when
        it was sent); return the callbacks waiting for it."""
        with self._cond:
            self._sending.discard(job_id)
            if isinstance(result, str):
                self._sent[job_id] = result
                while len(self._sent) > _REMEMBERED:
                    self._sent.popitem(last=False)
            return self._callbacks.pop(job_id, [])

    def _has_full_batch(self) -> bool:
        """Whether a queue has a whole batch waiting (called with the lock held)."""
        counts = collections.Counter(id(m.queue) for m in self._pending)
        return max(counts.values(), default=0) >= _FULL

    def _full_batches(self) -> list[StagedMessage]:
        """The pending messages that fill whole batches of their queue, in
        order (called with the lock held)."""
        counts = collections.Counter(id(m.queue) for m in self._pending)
        taking = {queue: n - n % _FULL for queue, n in counts.items()}
        taken: list[StagedMessage] = []
        for message in self._pending:
            if taking[id(message.queue)] > 0:
                taking[id(message.queue)] -= 1
                taken.append(message)
        return taken

    def _take(self, messages: list[StagedMessage]) -> list[StagedMessage]:
        """Move ``messages`` from the pending to being sent (lock held)."""
        taken = {id(m) for m in messages}
        self._pending = [m for m in self._pending if id(m) not in taken]
        self._sending.update(t.cast(str, m.job.job_id) for m in messages)
        return list(messages)

    def _wait_and_flush(self) -> None:
        """The buffer's thread: send whole batches as soon as they wait, and
        everything once a window passes without one; stop when none waits."""
        while True:
            with self._cond:
                if not self._has_full_batch():
                    self._cond.wait(self.window_seconds)
                if not self._pending:
                    self._timer = None
                    return
                held = self._take(
                    self._full_batches() if self._has_full_batch() else self._pending
                )
            self._send(held)
