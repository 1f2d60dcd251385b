"""Raw-socket clients of a health port: a probe, and the clients that would
starve a naive server (idle, one byte at a time, never reading)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

#: A well-behaved probe must be answered within this many seconds.
PROBE_DEADLINE = 2.0


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def request(
    port: int, raw: bytes, timeout: float = PROBE_DEADLINE
) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` and read the answer until the server closes the connection.

    Returns (status, headers with lower-cased names, body). Raises
    ``TimeoutError`` when the whole exchange takes longer than ``timeout``.
    """
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        received = b""
        while True:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """A probe: ``method path`` answered within :data:`PROBE_DEADLINE`."""
    raw = f"{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode()
    return request(port, raw)


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` seconds (reading
    and dropping whatever it sends meanwhile)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


def read_until_closed(sock: socket.socket, timeout: float) -> bytes | None:
    """Everything the server sends until it closes ``sock`` (what was read
    before a reset), or None when it is still open after ``timeout`` s."""
    received = b""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return received
        except TimeoutError:
            return None
        if not chunk:
            return received
        received += chunk
    return None


class Crowd:
    """Clients that hold connections: ``idle`` ones that never send a byte,
    ``dribbling`` ones that send one byte a second, and ``mute`` ones that send
    a request and never read the answer. Each reconnects when closed."""

    def __init__(self, port: int, idle: int, dribbling: int, mute: int) -> None:
        self.port = port
        self.sockets: list[socket.socket] = []
        self._stop = threading.Event()
        for _ in range(idle):
            self.sockets.append(self._connect())
        for _ in range(mute):
            sock = self._connect()
            sock.sendall(b"GET /status HTTP/1.1\r\n\r\n")
            self.sockets.append(sock)
        self._threads = [
            threading.Thread(target=self._dribble, daemon=True)
            for _ in range(dribbling)
        ]
        for thread in self._threads:
            thread.start()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        return sock

    def _dribble(self) -> None:
        message = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100
        while not self._stop.is_set():
            with contextlib.suppress(OSError), self._connect() as sock:
                for byte in message:
                    sock.sendall(bytes([byte]))
                    # Pacing, not synchronisation: one byte a second.
                    if self._stop.wait(1.0):
                        return

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        for sock in self.sockets:
            sock.close()
