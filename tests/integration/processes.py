"""Worker subprocesses whose JSON log lines the tests wait on."""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import signal
import subprocess
import threading
import time
import typing as t

LogEvent: t.TypeAlias = dict[str, t.Any]


class WorkerProcess:
    """A worker running in a subprocess, its stdout read by a background thread.

    Every stdout line is kept; lines that are JSON objects with an ``event``
    key (structlog's JSON renderer) are parsed into :attr:`events`. Always
    call :meth:`close` (the ``start_worker`` fixture does), which reaps the
    process and closes its pipe. With ``new_session`` it leads a process group
    of its own, which can be signalled as a terminal's Ctrl-C would.

    When a wait fails, the process gets SIGUSR1 so that one which registered
    ``faulthandler.register(signal.SIGUSR1, all_threads=True)`` prints every
    thread's stack into the failure message.
    """

    def __init__(
        self,
        args: cabc.Sequence[str],
        *,
        env: cabc.Mapping[str, str],
        cwd: str | os.PathLike[str] | None = None,
        new_session: bool = False,
    ) -> None:
        self.args = list(args)
        self.lines: list[str] = []
        self.events: list[LogEvent] = []
        self._cond = threading.Condition()
        self._eof = False
        self._process = subprocess.Popen(
            self.args,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=new_session,
        )
        self._reader = threading.Thread(
            target=self._read, name=f"read-worker-{self.pid}", daemon=True
        )
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for raw in stdout:
            line = raw.rstrip("\n")
            event = _parse(line)
            with self._cond:
                self.lines.append(line)
                if event is not None:
                    self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    # -- waiting on the log --

    def find(self, event_name: str, **fields: object) -> list[LogEvent]:
        """Return the events logged so far named ``event_name`` with ``fields``."""
        with self._cond:
            return [e for e in self.events if _matches(e, event_name, fields)]

    def wait_for(
        self,
        event_name: str,
        timeout: float = 15.0,
        *,
        count: int = 1,
        **fields: object,
    ) -> LogEvent:
        """Wait until ``count`` events named ``event_name`` with ``fields`` were logged.

        Returns the ``count``-th such event.

        :raises AssertionError: the process ended or the time ran out first;
            the message shows the output so far.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if _matches(e, event_name, fields)]
                if len(found) >= count:
                    return found[count - 1]
                remaining = deadline - time.monotonic()
                if self._eof or remaining <= 0:
                    break
                self._cond.wait(remaining)
        why = "the worker exited" if self._eof else f"{timeout} s passed"
        self.dump_stacks()
        raise AssertionError(
            f"{why} before {count} x {event_name} {fields or ''} was"
            f" logged (seen {len(found)}); output:\n{self.output()}"
        )

    def output(self) -> str:
        """Everything the process printed so far (the tail of it, when long)."""
        with self._cond:
            lines = self.lines[-200:]
        return "\n".join(lines)

    # -- controlling the process --

    def send_signal(self, signum: signal.Signals) -> None:
        self._process.send_signal(signum)

    def wait(self, timeout: float = 15.0) -> int:
        """Wait for the process to exit and its output to be read; return its status.

        :raises AssertionError: it is still running after ``timeout`` seconds.
        """
        try:
            status = self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            raise AssertionError(
                f"the worker still runs after {timeout} s; output:\n{self.output()}"
            ) from None
        self._reader.join(timeout)
        return status

    def dump_stacks(self) -> None:
        """Have the process print every thread's stack (``faulthandler`` on
        SIGUSR1), so a hang shows where it hangs."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGUSR1)
            # The dump is a burst of lines: wait until it has stopped growing.
            deadline = time.monotonic() + 3
            with self._cond:
                seen = -1
                while seen != len(self.lines) and time.monotonic() < deadline:
                    seen = len(self.lines)
                    self._cond.wait(0.5)

    def cpu_seconds(self) -> float:
        """User + system CPU time the process used so far (Linux only: ``/proc``)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Kill the process if it still runs, reap it and close its pipe."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._reader.join()
        if self._process.stdout is not None:
            self._process.stdout.close()


def _parse(line: str) -> LogEvent | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("event"), str):
        return value
    return None


def _matches(event: LogEvent, name: str, fields: cabc.Mapping[str, object]) -> bool:
    return event.get("event") == name and all(
        event.get(key) == value for key, value in fields.items()
    )
