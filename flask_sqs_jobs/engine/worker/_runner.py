"""run_worker: a JobWorker as the main loop of a process, stopped by signals."""

from __future__ import annotations

import collections.abc as cabc
import contextvars
import os
import signal
import sys
import threading
import types
import typing as t

import structlog

from ..model import EXIT_OK
from ._worker import JobWorker

if t.TYPE_CHECKING:
    from ..model import HandlerFunc
    from ..model import JobHandler
    from ..sqs import NamedQueues

log = structlog.get_logger(__name__)

#: How long a forced stop may spend releasing held messages before exiting.
FORCED_RELEASE_SECONDS = 5.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: How often the main thread acts on signals its handler recorded.
_SIGNAL_CHECK_SECONDS = 0.05


def run_worker(
    queues: NamedQueues,
    handlers: cabc.Mapping[str, HandlerFunc | JobHandler],
    *,
    idle_wait_seconds: int = 20,
    concurrency: int = 1,
    worker: JobWorker | None = None,
) -> None:
    """Run a worker until SIGTERM/SIGINT; see :meth:`QueueGroup.run_worker`.

    Must be called from the main thread. The first signal stops gracefully
    (running jobs finish, then this returns); a second one releases every held
    message (visibility 0) and exits the process at once with status
    128 + the signal number. Previous signal handlers are restored on return.

    :raises SystemExit: with code 1 after persistent receive failures.
    """
    if not handlers and worker is None:
        raise ValueError("run_worker needs at least one handler: job type -> function")
    if worker is None:
        worker = JobWorker(
            queues,
            handlers,
            idle_wait_seconds=idle_wait_seconds,
            concurrency=concurrency,
        )
    status = run_until_signalled(worker)
    if status != EXIT_OK:
        raise SystemExit(status)


def run_until_signalled(worker: JobWorker) -> int:
    """Run ``worker`` in a thread while this (main) thread handles signals.

    Keeping the worker off the main thread means a signal handler never
    interrupts code that holds the worker's locks.
    """
    result: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(worker.run())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="sqs-jobs-dispatcher"
    )
    signals_seen: list[int] = []

    def handle(signum: int, frame: types.FrameType | None) -> None:
        """The signal handler: note the signal for the loop below."""
        # Only record the signal: a second one may run this handler nested
        # inside the first, and anything taking a lock here (logging does)
        # would deadlock. The loop below acts on it.
        signals_seen.append(signum)

    previous = {sig: signal.signal(sig, handle) for sig in _STOP_SIGNALS}
    try:
        thread.start()
        handled = 0
        while thread.is_alive():
            thread.join(_SIGNAL_CHECK_SECONDS)
            while handled < len(signals_seen):
                signum = signals_seen[handled]
                handled += 1
                name = signal.Signals(signum).name
                if handled == 1:
                    log.info("stop_signal_received", signal=name, action="graceful")
                    worker.request_stop()
                else:
                    log.warning("stop_signal_received", signal=name, action="forced")
                    _force_exit(worker, signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if errors:
        raise errors[0]
    return result[0]


def _force_exit(worker: JobWorker, signum: int) -> t.NoReturn:
    """Release every held message (bounded in time) and exit at once.

    The release runs in a thread of its own, given at most
    :data:`FORCED_RELEASE_SECONDS`: a second signal means "now", and a
    server that does not answer must not hold the exit back. Messages left
    unreleased come back when their visibility ends.
    """
    releaser = threading.Thread(target=worker.release_all, daemon=True)
    releaser.start()
    releaser.join(FORCED_RELEASE_SECONDS)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)
