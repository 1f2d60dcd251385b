"""``flask sqs-worker --reload``: restart the worker when the app's code changes.

For development. The supervisor of ``--processes`` (:mod:`._supervisor`) runs
one worker process and polls the modification times of the app's Python files
about once a second (no extra dependency, no file-system events). When a file
changes, it stops the worker process gracefully, as SIGTERM does (nothing more
is received, running jobs finish), then starts a new one at once.

A forked process would keep the code the supervisor imported, so the worker
process here is a fresh interpreter running the same command line: it finds
the supervisor's socket (health port, supervisor gone) through the
:data:`CHANNEL_VARIABLE` environment variable, and runs a single worker.

Watched: every ``.py`` file under the app's root path and under the folder of
its top-level package, and every module loaded from the current folder;
hidden folders (``.venv``, ``.git``), ``__pycache__``, ``node_modules`` and
installed packages are left out. A worker process that exits by itself
(an error at start-up, a syntax error) is started again at the next change.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import os
import pathlib
import signal
import socket
import sys
import time
import typing as t

import structlog

from ._supervisor import RunWorker
from ._supervisor import serve_on_channel
from ._supervisor import Supervisor
from ._supervisor_health import Child

if t.TYPE_CHECKING:
    from flask import Flask

log = structlog.get_logger(__name__)

#: Names the socket a worker process started by ``--reload`` reports on:
#: ``"<fd>"``, or ``"<fd> health"`` when it must report a health port.
CHANNEL_VARIABLE = "_SQS_JOBS_WORKER_CHANNEL"
#: How often the files are looked at, in seconds.
POLL_SECONDS = 1.0
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages"})

Snapshot: t.TypeAlias = dict[str, tuple[int, int]]


class FileWatcher:
    """Tell which Python files under ``roots`` (and of ``files``) changed."""

    def __init__(
        self,
        roots: cabc.Iterable[pathlib.Path],
        files: cabc.Iterable[pathlib.Path] = (),
        *,
        interval: float = POLL_SECONDS,
    ) -> None:
        self.roots = sorted({root.resolve() for root in roots})
        self._files = sorted({path.resolve() for path in files})
        self._interval = interval
        self._snapshot = self._scan()
        self._scanned_at = time.monotonic()

    @property
    def watched(self) -> int:
        return len(self._snapshot)

    def changed(self) -> list[str]:
        """The files added, removed or modified since the last look (at most
        one look per interval), sorted."""
        now = time.monotonic()
        if now - self._scanned_at < self._interval:
            return []
        self._scanned_at = now
        before, self._snapshot = self._snapshot, self._scan()
        return sorted(
            path
            for path in before.keys() | self._snapshot.keys()
            if before.get(path) != self._snapshot.get(path)
        )

    def _scan(self) -> Snapshot:
        snapshot: Snapshot = {}
        for path in self._files:
            _stat_into(snapshot, str(path))
        for root in self.roots:
            for folder, folders, names in os.walk(root):
                folders[:] = [f for f in folders if not _skipped(folder, f)]
                for name in names:
                    if name.endswith(".py"):
                        _stat_into(snapshot, os.path.join(folder, name))
        return snapshot


def _stat_into(snapshot: Snapshot, path: str) -> None:
    try:
        stat = os.stat(path)
    except OSError:  # removed meanwhile: its absence is the change
        return
    snapshot[path] = (stat.st_mtime_ns, stat.st_size)


def _skipped(parent: str, name: str) -> bool:
    return (
        name.startswith(".")
        or name in _SKIPPED_FOLDERS
        or _is_installed(os.path.join(parent, name))
    )


def _is_installed(path: str) -> bool:
    """Whether ``path`` is inside the interpreter's or the virtualenv's files."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return any(
        path == prefix or path.startswith(prefix + os.sep) for prefix in prefixes
    )


def watcher_for(app: Flask) -> FileWatcher:
    """The watcher of ``app``'s Python files (see the module doc)."""
    roots = [pathlib.Path(app.root_path)]
    top = sys.modules.get(app.import_name.partition(".")[0])
    top_file = getattr(top, "__file__", None)
    if top_file and getattr(top, "__path__", None) is not None:
        roots.append(pathlib.Path(top_file).parent)
    here = pathlib.Path.cwd().resolve()
    files = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py") or _is_installed(file):
            continue
        path = pathlib.Path(file).resolve()
        if path.is_relative_to(here) and not any(
            part.startswith(".") or part in _SKIPPED_FOLDERS
            for part in path.relative_to(here).parts[:-1]
        ):
            files.append(path)
    return FileWatcher(roots, files)


def restart_command() -> list[str]:
    """The command line of this process, to run it again in a fresh interpreter."""
    options = [f"-W{option}" for option in sys.warnoptions]
    options += [
        f"-X{key}" if value is True else f"-X{key}={value}"
        for key, value in sys._xoptions.items()
    ]
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name != "__main__":  # python -m flask ...
        module = spec.name.removesuffix(".__main__")
        return [sys.executable, *options, "-m", module, *sys.argv[1:]]
    script = sys.argv[0]
    if not os.path.isfile(script):  # not a script Python can run: go by module
        return [sys.executable, *options, "-m", "flask", *sys.argv[1:]]
    return [sys.executable, *options, script, *sys.argv[1:]]


class ReloadingSupervisor(Supervisor):
    """One worker process, started afresh whenever a watched file changes."""

    def __init__(
        self,
        watcher: FileWatcher,
        command: cabc.Sequence[str],
        *,
        health_host: str = "127.0.0.1",
        health_port: int | None = None,
    ) -> None:
        super().__init__(
            1, _run_in_place, health_host=health_host, health_port=health_port
        )
        self._watcher = watcher
        self._command = list(command)
        #: The worker process was asked to stop for a reload.
        self._reloading = False
        #: It exited by itself: start it again at the next change.
        self._waiting = False

    def run(self) -> int:
        log.info(
            "reload_watching",
            files=self._watcher.watched,
            roots=[str(root) for root in self._watcher.roots],
            interval_seconds=POLL_SECONDS,
        )
        return super().run()

    def _serve(self, channel: socket.socket) -> t.NoReturn:
        os.set_inheritable(channel.fileno(), True)
        report = " health" if self._health_port is not None else ""
        env = {**os.environ, CHANNEL_VARIABLE: f"{channel.fileno()}{report}"}
        os.execve(self._command[0], self._command, env)

    def _watch(self) -> None:
        if self._stopping:
            return
        changed = self._watcher.changed()
        if not changed:
            return
        child = self._children[0]
        shown = [_shown(path) for path in changed[:5]]
        if child.pid is not None and not self._reloading:
            log.info("files_changed", files=shown, action="reloading the worker")
            self._reloading = True
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                os.kill(child.pid, signal.SIGTERM)
        elif self._waiting:
            log.info("files_changed", files=shown, action="starting the worker")
            self._waiting = False
            child.restart_at = time.monotonic()

    def _decide(
        self, child: Child, code: int, pid: int | None, how: dict[str, t.Any]
    ) -> None:
        if self._stopping:
            super()._decide(child, code, pid, how)
            return
        if self._reloading or code == 0:
            action = "reloading" if self._reloading else "starting it again"
            self._reloading = False
            child.restart_at = time.monotonic()
        else:
            action = "waiting for a file change"
            self._waiting = True
        log.info(
            "worker_process_exited", process=child.index, pid=pid, action=action, **how
        )


def _shown(path: str) -> str:
    try:
        return str(pathlib.Path(path).relative_to(pathlib.Path.cwd()))
    except ValueError:
        return path


def _run_in_place(
    health_host: str,
    health_port: int | None,
    on_health_started: cabc.Callable[[int], None] | None = None,
) -> int:  # pragma: no cover - the reloading supervisor execs instead
    raise AssertionError("a reloading supervisor starts its worker by exec")


def reloaded_channel() -> tuple[socket.socket, bool] | None:
    """In a worker process started by ``--reload``: the supervisor's socket and
    whether to report a health port; None in any other process."""
    value = os.environ.pop(CHANNEL_VARIABLE, None)
    if value is None:
        return None
    fd, _, report = value.partition(" ")
    return socket.socket(fileno=int(fd)), report == "health"


def serve_reloaded(
    channel: tuple[socket.socket, bool], run_worker: RunWorker, health_host: str
) -> int:
    """Run the worker of a process started by ``--reload``; its exit status."""
    sock, report = channel
    return serve_on_channel(sock, run_worker, health_host, report)
