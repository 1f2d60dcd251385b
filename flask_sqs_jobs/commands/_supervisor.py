"""The supervisor of ``flask sqs-worker --processes N``: N forked worker processes.

One Python process runs Python code on one core at a time (the GIL), so the
supervisor forks N worker processes. Each runs exactly what ``--processes 1``
runs, with its own boto3 client, threads and (when asked) health server. The
supervisor itself never talks to SQS.

- SIGTERM/SIGINT are forwarded to every worker process (graceful stop); a
  second signal is forwarded again and the supervisor exits at once with
  128 + the signal number. Worker processes run in their own process group,
  so a Ctrl-C (SIGINT to the terminal's foreground group) reaches only the
  supervisor, and each worker process gets it once, forwarded.
- A worker process killed by a signal, or exiting with a status other than
  0, 1 or 2, is restarted after 1 s, 2 s, 4 s ... (at most 30 s; back to 1 s
  once a process ran for a minute). One exiting 1 (persistent receive
  failures) or 2 (configuration) stops the others gracefully, and the
  supervisor exits with that status; one exiting 0 by itself stops them too.
  One exiting ``EXIT_RECYCLED`` (``--max-jobs`` ...) is replaced at once.
- Health (:mod:`._supervisor_health`): each worker process serves its own
  on an ephemeral 127.0.0.1 port, which it reports through a socket pair; the
  supervisor serves the one public port for all of them.
- The socket pair also tells a worker process that the supervisor died (end
  of file): it then stops gracefully instead of running on unsupervised.
- ``--reload`` (:mod:`._reloading`) is a supervisor of one worker process,
  started afresh when the app's code changes.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
import types
import typing as t

import click
import structlog

from ..engine.model import EXIT_CRASHED
from ..engine.model import EXIT_OK
from ..engine.model import EXIT_RECEIVE_FAILURES
from ..engine.model import EXIT_RECYCLED
from ..engine.model import EXIT_USAGE
from ._supervisor_health import Child
from ._supervisor_health import SupervisorHealth

log = structlog.get_logger(__name__)

#: Cap of the delay before a dead worker process is started again, in seconds.
MAX_RESTART_BACKOFF = 30.0
#: A worker process that ran this long is restarted after the shortest delay.
HEALTHY_RUN_SECONDS = 60.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_TICK = 0.05
#: Exit statuses of a worker process that stop the others: restarting would not help.
_STOPPING = (EXIT_RECEIVE_FAILURES, EXIT_USAGE)


class RunWorker(t.Protocol):
    """Run one worker in this process; return its exit status."""

    def __call__(
        self,
        health_host: str,
        health_port: int | None,
        on_health_started: cabc.Callable[[int], None] | None = None,
    ) -> int: ...


class Supervisor:
    """Run ``processes`` worker processes until they stop; see the module doc.

    :param run_worker: runs one worker in the calling (forked) process.
    :param health_port: serve ``/healthz``, ``/status`` and ``/metrics`` for
        all processes on this port; ``None`` for no health server.
    :param forget_clients: called first in each forked process, to drop any
        SQS client inherited from the supervisor.
    """

    def __init__(
        self,
        processes: int,
        run_worker: RunWorker,
        *,
        health_host: str = "127.0.0.1",
        health_port: int | None = None,
        forget_clients: cabc.Callable[[], None] = lambda: None,
    ) -> None:
        self._children = [Child(index) for index in range(processes)]
        self._run_worker = run_worker
        self._health_host = health_host
        self._health_port = health_port
        self._forget_clients = forget_clients
        self._lock = threading.Lock()
        self._signals: list[int] = []
        self._stopping = False
        self._status = EXIT_OK
        self._health: SupervisorHealth | None = None

    def run(self) -> int:
        """Start the processes and supervise them; return the exit status.

        Must be called from the main thread, before this process created any
        SQS client or thread it would not want its children to inherit.
        """
        previous = {sig: signal.signal(sig, self._record) for sig in _STOP_SIGNALS}
        try:
            log.info("supervisor_started", processes=len(self._children))
            for child in self._children:
                self._start(child)
            if self._health_port is not None:
                self._health = SupervisorHealth(
                    self._children, self._lock, self._health_host, self._health_port
                )
                self._health.start()
                log.info("health_server_started", port=self._health.port)
            handled = 0
            while not self._stopping or any(c.pid for c in self._children):
                handled = self._handle_signals(handled)
                self._reap()
                self._restart_due()
                self._watch()
                self._read_ports()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self._health is not None:
                self._health.stop()
        log.info("supervisor_stopped", exit_status=self._status)
        return self._status

    # -- processes -------------------------------------------------------------

    def _start(self, child: Child) -> None:
        ours, theirs = socket.socketpair()
        sys.stdout.flush()
        sys.stderr.flush()
        # Blocked until the new process has its own handlers: a stop signal
        # forwarded right after the fork must not reach the supervisor's.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                ours.close()
                self._child_main(child, theirs)
            with contextlib.suppress(OSError):  # it may have done it already
                os.setpgid(pid, pid)
        except OSError:
            ours.close()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            theirs.close()
        with self._lock:
            child.pid, child.channel, child.received = pid, ours, b""
            child.port, child.status, child.restart_at = None, None, None
            child.started_at = time.monotonic()
        log.info("worker_process_started", process=child.index, pid=pid)

    def _child_main(self, child: Child, channel: socket.socket) -> t.NoReturn:
        status = EXIT_CRASHED
        try:
            os.setpgid(0, 0)
            for sig in _STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            for other in self._children:
                if other.channel is not None:
                    other.channel.close()
            if self._health is not None:
                self._health.close_in_child()
            self._forget_clients()
            status = self._serve(channel)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(bool(exc.code))
        except click.ClickException as exc:
            exc.show()
            status = exc.exit_code
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status)

    def _serve(self, channel: socket.socket) -> int:
        """In the new worker process: run the worker; return its exit status."""
        return serve_on_channel(
            channel, self._run_worker, self._health_host, self._health_port is not None
        )

    def _watch(self) -> None:
        """Called between two rounds of the loop (``--reload`` watches files)."""

    def _record(self, signum: int, frame: types.FrameType | None) -> None:
        # Only record: the loop acts on it (a handler must not take locks).
        self._signals.append(signum)

    def _handle_signals(self, handled: int) -> int:
        while handled < len(self._signals):
            signum = self._signals[handled]
            handled += 1
            name = signal.Signals(signum).name
            if handled == 1:
                log.info("stop_signal_received", signal=name, action="graceful")
                if not self._stopping:  # else the processes are stopping already
                    self._stop(signum)
            else:
                log.warning("stop_signal_received", signal=name, action="forced")
                self._forward(signum)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(128 + signum)
        return handled

    def _stop(self, signum: int = signal.SIGTERM) -> None:
        self._stopping = True
        with self._lock:
            for child in self._children:
                child.restart_at = None
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        for child in self._children:
            if child.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signum)

    def _reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for child in self._children:
                if child.pid == pid:
                    self._exited(child, os.waitstatus_to_exitcode(wait_status))

    def _exited(self, child: Child, code: int) -> None:
        with self._lock:
            pid, child.pid, child.port, child.status = child.pid, None, None, None
            if child.channel is not None:
                child.channel.close()
                child.channel = None
        how: dict[str, t.Any] = (
            {"signal": signal.Signals(-code).name}
            if code < 0
            else {"exit_status": code}
        )
        self._decide(child, code, pid, how)

    def _decide(
        self, child: Child, code: int, pid: int | None, how: dict[str, t.Any]
    ) -> None:
        """What to do once a worker process exited with ``code``."""
        now = time.monotonic()
        if code in _STOPPING:
            self._status = max(self._status, code)
        if self._stopping:
            log.info("worker_process_exited", process=child.index, pid=pid, **how)
        elif code == EXIT_RECYCLED:
            with self._lock:
                child.restart_at = now
            log.info("worker_process_recycled", process=child.index, pid=pid)
        elif code in (EXIT_OK, *_STOPPING):
            log.warning(
                "worker_process_exited",
                process=child.index,
                pid=pid,
                action="stopping the others",
                **how,
            )
            self._stop()
        else:
            if now - child.started_at >= HEALTHY_RUN_SECONDS:
                child.restarts = 0
            backoff = min(MAX_RESTART_BACKOFF, 2.0**child.restarts)
            child.restarts += 1
            with self._lock:
                child.restart_at = now + backoff
            log.warning(
                "worker_process_restarted",
                process=child.index,
                pid=pid,
                backoff_seconds=backoff,
                **how,
            )

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self._children:
            due = child.restart_at is not None and child.restart_at <= now
            if due and not self._stopping:
                try:
                    self._start(child)
                except OSError as exc:  # out of processes or memory: try later
                    child.restart_at = now + MAX_RESTART_BACKOFF
                    log.error("worker_process_start_failed", error=str(exc))

    def _read_ports(self) -> None:
        waiting = {c.channel: c for c in self._children if c.channel and c.port is None}
        if not waiting or self._health_port is None:
            time.sleep(_TICK)
            return
        readable, _, _ = select.select(list(waiting), [], [], _TICK)
        for channel in readable:
            child = waiting[channel]
            data = channel.recv(64)
            if not data:  # it died: reaped in a moment
                child.port = -1
            child.received += data
            line, newline, _ = child.received.partition(b"\n")
            if newline:
                with self._lock:
                    child.port = int(line)


def serve_on_channel(
    channel: socket.socket, run_worker: RunWorker, health_host: str, report: bool
) -> int:
    """In a worker process: run the worker, watching the supervisor through
    ``channel`` and, if ``report``, telling it the health server's port."""
    threading.Thread(target=_watch_supervisor, args=(channel,), daemon=True).start()
    if not report:
        return run_worker(health_host, None)

    def report_port(port: int) -> None:
        channel.sendall(b"%d\n" % port)

    return run_worker("127.0.0.1", 0, report_port)


def _watch_supervisor(channel: socket.socket) -> None:
    """In a worker process: stop gracefully once the supervisor is gone."""
    with contextlib.suppress(OSError):
        while channel.recv(64):
            pass
    os.kill(os.getpid(), signal.SIGTERM)
