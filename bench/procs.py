"""Child processes: each in its own session, always reaped, peak RSS from /proc."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from pathlib import Path

_LIVE: set[subprocess.Popen[bytes]] = set()
PR_SET_PDEATHSIG = 1


def spawn(
    args: list[str], *, env: dict[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Start ARGS in a new session (to signal its whole tree), logging to LOG_PATH."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            args,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    _LIVE.add(proc)
    return proc


def wait(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """PROC's exit code once it ended within TIMEOUT seconds, else None."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None
    _LIVE.discard(proc)
    return code


def stop(proc: subprocess.Popen[bytes], *, grace: float = 10.0) -> int:
    """SIGTERM the leader, wait GRACE seconds, SIGKILL the session; always reaps."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        if wait(proc, grace) is None:
            _signal_group(proc, signal.SIGKILL)
            wait(proc, 10.0)
    _signal_group(proc, signal.SIGKILL)  # stragglers the leader left behind
    return proc.returncode if proc.returncode is not None else -9


def kill_all() -> None:
    """Kill every child still alive (called on the way out, whatever happened)."""
    for proc in list(_LIVE):
        _signal_group(proc, signal.SIGKILL)
        wait(proc, 5.0)


def peak_rss_mb(proc: subprocess.Popen[bytes]) -> tuple[float, int]:
    """(largest VmHWM in MB, process count) over the processes of PROC's session.

    VmHWM is a high-water mark, so one look after the work is done sees the peak.
    (wait4's ru_maxrss would not do: a forked child starts with its parent's mark.)
    """
    peak, count = 0.0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) != proc.pid:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except (OSError, IndexError, ValueError):
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) / 1024)
                count += 1
    return peak, count


def _die_with_parent() -> None:
    """Linux: SIGKILL this child if the runner dies without cleaning up."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
