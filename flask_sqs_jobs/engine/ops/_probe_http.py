"""A small HTTP server for health probes that no client can starve.

One thread runs one :mod:`selectors` loop over every connection, so an idle,
slow or never-reading client costs a socket, never a thread, and the limits
below keep the process's file descriptors for its SQS calls. A new connection
beyond :data:`MAX_CONNECTIONS` closes the oldest one that has sent nothing (or,
failing that, the oldest one not being handled), so a fresh probe always gets
through. Where the system allows it (Linux), the kernel holds a connection
until its first bytes arrive or :data:`_SILENT_HOLD` has passed
(``TCP_DEFER_ACCEPT``), so a probe reaches the loop with its request, never as
one more silent connection that a flood could push out. One ``GET`` or
``HEAD`` per connection, every answer with ``Connection: close``.

Handlers run in the loop's thread and must be quick, except for the paths
given as ``offload``: those run on threads of their own, at most
:data:`MAX_OFFLOADED` at a time (beyond that: ``503``).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import selectors
import socket
import threading
import time

from ._probe_wire import encode_reply
from ._probe_wire import error_reply
from ._probe_wire import Handler
from ._probe_wire import MAX_REQUEST_BYTES as MAX_REQUEST_BYTES
from ._probe_wire import read_request
from ._probe_wire import Reply as Reply

#: Open connections at most (a new one closes the oldest beyond that).
MAX_CONNECTIONS = 32
#: Seconds from reaching the loop to the end of the request head.
REQUEST_TIMEOUT = 3.0
#: Seconds to write the whole answer.
WRITE_TIMEOUT = 3.0
#: Offloaded (slow) requests being handled at once at most.
MAX_OFFLOADED = 4
#: Seconds to wait, after answering, for the client to close first.
_LINGER = 1.0
#: Seconds the kernel keeps a connection that has sent nothing from the loop.
_SILENT_HOLD = 1
#: Completed connections the kernel queues for the loop (silent ones held by
#: the kernel cost no file descriptor).
_BACKLOG = 1024
#: Connections accepted per round of the loop, after the connections already
#: accepted were read: a probe is read before a burst can push it out.
_ACCEPTS_PER_ROUND = MAX_CONNECTIONS // 4


_READING, _HANDLING, _WRITING, _LINGERING = "reading", "handling", "writing", "linger"
_LISTENER, _WAKE = object(), object()


class _Connection:
    __slots__ = ("deadline", "head", "out", "received", "sock", "state")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.state = _READING
        self.received = b""
        self.head = False
        self.out = memoryview(b"")


class ProbeServer:
    """Serve ``handler`` on ``(host, port)`` (0 picks a free port) once started."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        offload: cabc.Collection[str] = (),
        name: str = "sqs-jobs-health",
    ) -> None:
        self._handler = handler
        self._offload = frozenset(offload)
        self._name = name
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server(
            (host, port), family=family, backlog=_BACKLOG
        )
        _hold_silent_connections(self._listener)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        #: Open connections, oldest first.
        self._connections: dict[_Connection, None] = {}
        self._lock = threading.Lock()
        self._done: list[tuple[_Connection, Reply]] = []
        self._offloaded = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def start(self) -> None:
        thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread = thread
        thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.join()
        self._close_all()

    def close_in_child(self) -> None:
        """In a forked process: close the inherited sockets, leaving the
        parent's registrations (the selector is shared with it) alone."""
        self._close_all(unregister=False)

    # -- the loop ----------------------------------------------------------

    def _serve(self) -> None:
        while not self._stopping.is_set():
            accept = False
            for key, events in self._selector.select(self._timeout()):
                if key.data is _LISTENER:
                    accept = True
                elif key.data is _WAKE:
                    self._finish_offloaded()
                elif key.data not in self._connections:
                    continue  # closed earlier in this round
                elif events & selectors.EVENT_WRITE:
                    self._write(key.data)
                else:
                    self._read(key.data)
            if accept:
                self._accept()
            self._expire(time.monotonic())

    def _timeout(self) -> float:
        now = time.monotonic()
        waits = [c.deadline - now for c in self._connections if c.state != _HANDLING]
        return max(0.0, min([1.0, *waits]))

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                sock, _address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors: let some be freed
                self._stopping.wait(0.05)
                return
            if len(self._connections) >= MAX_CONNECTIONS and not self._evict():
                sock.close()
                continue
            sock.setblocking(False)
            connection = _Connection(sock, time.monotonic() + REQUEST_TIMEOUT)
            self._connections[connection] = None
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _evict(self) -> bool:
        """Close the oldest connection that has sent nothing; else the oldest idle one.

        A probe that has sent its request is never the first to go, however
        many silent connections arrive after it.
        """
        waiting = [c for c in self._connections if c.state != _HANDLING]
        for connection in waiting:
            if not connection.received and not _has_pending_bytes(connection.sock):
                self._close(connection)
                return True
        if waiting:
            self._close(waiting[0])
            return True
        return False

    def _expire(self, now: float) -> None:
        expired = [
            c for c in self._connections if c.state != _HANDLING and now >= c.deadline
        ]
        for connection in expired:
            self._close(connection)

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data and connection.state == _HANDLING:
            # Half-closed after its request: answer all the same.
            self._selector.unregister(connection.sock)
        elif not data:
            self._close(connection)
        elif connection.state == _READING:
            connection.received += data
            self._parse(connection)

    def _parse(self, connection: _Connection) -> None:
        request = read_request(connection.received)
        if request is None:
            return
        if isinstance(request, Reply):
            self._reply(connection, request)
            return
        method, path = request
        connection.head = method == "HEAD"
        if path not in self._offload:
            self._reply(connection, self._handle(path))
            return
        with self._lock:
            busy = self._offloaded >= MAX_OFFLOADED
            self._offloaded += not busy
        if busy:
            self._reply(connection, error_reply(503, "busy, try again"))
            return
        connection.state = _HANDLING
        threading.Thread(
            target=self._handle_offloaded, args=(connection, path), daemon=True
        ).start()

    def _handle(self, path: str) -> Reply:
        try:
            return self._handler(path)
        except Exception:
            return error_reply(500, "internal error")

    def _handle_offloaded(self, connection: _Connection, path: str) -> None:
        reply = self._handle(path)
        with self._lock:
            self._offloaded -= 1
            self._done.append((connection, reply))
        self._wake()

    def _finish_offloaded(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(512):
                pass
        with self._lock:
            done, self._done = self._done, []
        for connection, reply in done:
            if connection in self._connections:
                self._reply(connection, reply)

    def _reply(self, connection: _Connection, reply: Reply) -> None:
        connection.out = memoryview(encode_reply(reply, head_only=connection.head))
        connection.state = _WRITING
        connection.deadline = time.monotonic() + WRITE_TIMEOUT
        try:
            self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
        except KeyError:  # half-closed while handled
            self._selector.register(connection.sock, selectors.EVENT_WRITE, connection)
        self._write(connection)

    def _write(self, connection: _Connection) -> None:
        try:
            sent = connection.sock.send(connection.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(connection)
            return
        connection.out = connection.out[sent:]
        if connection.out:
            return
        # Half-close, then read (and drop) until the client closes: closing
        # with its bytes unread would reset the connection, maybe before the
        # client read the answer.
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_WR)
        connection.state = _LINGERING
        connection.deadline = time.monotonic() + _LINGER
        self._selector.modify(connection.sock, selectors.EVENT_READ, connection)

    def _close(self, connection: _Connection) -> None:
        self._connections.pop(connection, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection.sock)
        connection.sock.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _close_all(self, unregister: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        for connection in list(self._connections):
            if unregister:
                self._close(connection)
            else:
                connection.sock.close()
        self._connections.clear()
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()


def _hold_silent_connections(listener: socket.socket) -> None:
    """Have the kernel deliver a connection once it has data (or after a while)."""
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is not None:
        with contextlib.suppress(OSError):
            listener.setsockopt(socket.IPPROTO_TCP, option, _SILENT_HOLD)


def _has_pending_bytes(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes this server has not read yet (a request coming)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # BlockingIOError: nothing yet; others: the peer is gone
        return False
