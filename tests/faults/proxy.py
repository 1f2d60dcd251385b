"""A fault-injecting HTTP proxy between the workers and the SQS server.

It listens on 127.0.0.1 and forwards each request byte for byte to the server,
one upstream connection per request. Rules chosen at run time decide, per
request, whether to inject a fault instead:

- ``RESET``: reset the client connection before forwarding anything.
- ``HTTP_500`` / ``HTTP_503``: answer with a server error, not forwarded.
- ``THROTTLE`` / ``REQUEST_THROTTLED``: answer 400 with the JSON-protocol error
  botocore parses as a throttling error (``ThrottlingException``, or SQS's own
  ``RequestThrottled``), not forwarded.
- ``ERROR``: answer with any error code and status (e.g. a non-retryable
  ``ReceiptHandleIsInvalid``), not forwarded.
- ``DELAY``: wait before forwarding (the server applies the request late).
- ``SLOW_RESPONSE``: forward, then wait before answering.
- ``DROP_RESPONSE``: forward, read the server's whole response (so the request
  was applied), then reset the client connection without answering.

:meth:`FaultProxy.refuse` closes the listening socket (connections are
refused, open ones reset) until :meth:`FaultProxy.restore` binds the same port
again. The SQS action comes from the ``X-Amz-Target`` header (JSON protocol)
or the ``Action`` form field (query protocol); error bodies use the JSON
protocol, which is what boto3 speaks to SQS.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import json
import random
import socket
import struct
import threading
import time
import types
import typing as t
import urllib.parse
import uuid

#: Bytes of a request or response head we accept before giving up on it.
_MAX_HEAD = 64 * 1024


class Fault(enum.StrEnum):
    RESET = "reset"
    HTTP_500 = "http_500"
    HTTP_503 = "http_503"
    THROTTLE = "throttle"
    REQUEST_THROTTLED = "request_throttled"
    ERROR = "error"
    DELAY = "delay"
    SLOW_RESPONSE = "slow_response"
    DROP_RESPONSE = "drop_response"


#: Faults that only add latency; a request may get these and one other fault.
LATENCY_FAULTS = frozenset({Fault.DELAY, Fault.SLOW_RESPONSE})

#: (status, error code, query-protocol code or "", message) of canned errors.
_CANNED: dict[Fault, tuple[int, str, str, str]] = {
    Fault.HTTP_500: (
        500,
        "InternalError",
        "InternalError;Receiver",
        "We encountered an internal error. Please try again.",
    ),
    Fault.HTTP_503: (
        503,
        "ServiceUnavailable",
        "ServiceUnavailable;Receiver",
        "Service is unavailable. Please try again.",
    ),
    Fault.THROTTLE: (400, "ThrottlingException", "", "Rate exceeded"),
    Fault.REQUEST_THROTTLED: (
        400,
        "RequestThrottled",
        "RequestThrottled;Sender",
        "Request is throttled.",
    ),
}


@dataclasses.dataclass(eq=False)
class Rule:
    """When and how to inject one kind of fault.

    :param fault: what to do.
    :param actions: SQS actions it applies to (``ReceiveMessage``, ...); empty
        means every action.
    :param probability: chance of applying to a matching request.
    :param limit: apply at most this many times (None: no limit).
    :param delay: ``(low, high)`` seconds, drawn uniformly, for the latency faults.
    :param queue: apply only to requests whose ``QueueUrl`` (or ``QueueName``)
        contains this.
    :param status: HTTP status of an ``ERROR`` answer.
    :param code: error code of an ``ERROR`` answer.
    """

    fault: Fault
    actions: frozenset[str] = frozenset()
    probability: float = 1.0
    limit: int | None = None
    delay: tuple[float, float] = (0.0, 0.0)
    queue: str | None = None
    status: int = 400
    code: str = "InternalError"
    #: How many requests it was applied to so far.
    applied: int = 0

    def matches(self, action: str, queue_url: str) -> bool:
        if self.actions and action not in self.actions:
            return False
        if self.queue is not None and self.queue not in queue_url:
            return False
        return self.limit is None or self.applied < self.limit


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One request as the proxy saw it (kept when the journal is on)."""

    #: When the request arrived, and when it was answered (or dropped).
    arrived: float
    at: float
    action: str
    request: dict[str, t.Any]
    #: The fault injected, or None when forwarded and answered as is.
    fault: Fault | None
    #: The server's HTTP status, or None when the request was not forwarded.
    status: int | None
    #: The server's parsed JSON answer, for ``ReceiveMessage`` only.
    response: dict[str, t.Any] | None


@dataclasses.dataclass
class _Message:
    """An HTTP request or response: its raw bytes and what the proxy needs."""

    raw: bytes
    start_line: str
    headers: dict[str, str]
    body: bytes


class _Reader:
    """Buffered reads of HTTP messages from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def _fill(self) -> bool:
        chunk = self._sock.recv(65536)
        if not chunk:
            return False
        self._buffer += chunk
        return True

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            if not self._fill():
                raise ConnectionError("connection closed mid-message")
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def _line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD or not self._fill():
                raise ConnectionError("connection closed mid-line")
        return self._take(end + 2)

    def read(self, *, is_response: bool = False) -> _Message | None:
        """Read one whole message; None on a clean end of stream before one."""
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise ConnectionError("HTTP head too long")
            if not self._fill():
                if self._buffer:
                    raise ConnectionError("connection closed mid-head")
                return None
        head = self._take(end + 4)
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        raw = [head]
        body = b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size_line = self._line()
                raw.append(size_line)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (trailer := self._line()) != b"\r\n":
                        raw.append(trailer)
                    raw.append(trailer)
                    break
                chunk = self._take(size + 2)
                raw.append(chunk)
                parts.append(chunk[:-2])
            body = b"".join(parts)
        elif "content-length" in headers:
            body = self._take(int(headers["content-length"]))
            raw.append(body)
        elif is_response:
            # No framing: the body runs until the server closes the connection.
            while self._fill():
                pass
            body, self._buffer = self._buffer, b""
            raw.append(body)
        return _Message(b"".join(raw), lines[0], headers, body)


class _Connection:
    """A client connection and the upstream connection of its current request."""

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = False


class FaultProxy:
    """Forward HTTP from 127.0.0.1 to ``upstream``, injecting faults by rule.

    Use it as a context manager (or call :meth:`close`): every socket and
    thread it made is closed and joined on the way out.

    :param upstream: the server's endpoint URL (``http://host:port``).
    :param seed: seeds the draws against each rule's probability.
    :param journal: keep an :class:`Exchange` per request (memory grows with
        the number of requests: for small scenarios).
    """

    def __init__(self, upstream: str, *, seed: int = 0, journal: bool = False) -> None:
        parts = urllib.parse.urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._random = random.Random(seed)
        self._keep_journal = journal
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._connections: set[_Connection] = set()
        self._threads: set[threading.Thread] = set()
        self._closing = threading.Event()
        self._listener: socket.socket | None = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        #: (action, fault name or "ok") -> requests.
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.journal: list[Exchange] = []
        #: How often :meth:`refuse` took the proxy down, and for how long in all.
        self.refusals = 0
        self.refused_seconds = 0.0
        self._down_since: float | None = None
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="fault-proxy-accept", daemon=True
        )
        self._acceptor.start()

    # -- control --

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Remove every rule (the proxy forwards everything again)."""
        with self._lock:
            self._rules.clear()

    @contextlib.contextmanager
    def rules(self, *rules: Rule) -> t.Iterator[tuple[Rule, ...]]:
        """Apply ``rules`` for the duration of a ``with`` block."""
        for rule in rules:
            self.add(rule)
        try:
            yield rules
        finally:
            for rule in rules:
                self.remove(rule)

    @property
    def refusing(self) -> bool:
        with self._lock:
            return self._listener is None

    def refuse(self) -> None:
        """Stop listening: new connections are refused, open ones reset."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections = list(self._connections)
            if listener is not None and not self._closing.is_set():
                self.refusals += 1
                self._down_since = time.monotonic()
        if listener is not None:
            _close(listener)
        for connection in connections:
            self._abort(connection)

    def restore(self, timeout: float = 10.0) -> None:
        """Listen on the same port again after :meth:`refuse`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                listener = self._listen(self.port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        with self._lock:
            if self._listener is not None:
                _close(listener)
                return
            self._listener = listener
            if self._down_since is not None:
                self.refused_seconds += time.monotonic() - self._down_since
                self._down_since = None

    def snapshot(self) -> collections.Counter[tuple[str, str]]:
        """Requests so far: (action, fault name or "ok") -> count."""
        with self._lock:
            return collections.Counter(self.counts)

    def injected(self) -> collections.Counter[str]:
        """Faults injected so far, by kind."""
        totals: collections.Counter[str] = collections.Counter()
        with self._lock:
            for (_, outcome), count in self.counts.items():
                if outcome != "ok":
                    totals[outcome] += count
        return totals

    def close(self) -> None:
        self._closing.set()
        self.refuse()
        self._acceptor.join(10)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()

    # -- accepting --

    @staticmethod
    def _listen(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
            sock.settimeout(0.2)
        except OSError:
            sock.close()
            raise
        return sock

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:
                self._closing.wait(0.05)
                continue
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                continue  # closed by refuse(): wait for restore()
            client.settimeout(None)
            connection = _Connection(client)
            thread = threading.Thread(
                target=self._serve, args=(connection,), daemon=True
            )
            with self._lock:
                if self._listener is None or self._closing.is_set():
                    _reset(client)
                    continue
                self._connections.add(connection)
                self._threads.add(thread)
            thread.start()

    def _abort(self, connection: _Connection) -> None:
        """Reset both sides of a connection (the serving thread then ends)."""
        connection.closed = True
        with contextlib.suppress(OSError):
            connection.client.shutdown(socket.SHUT_RDWR)
        upstream = connection.upstream
        if upstream is not None:
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_RDWR)

    # -- serving one client connection --

    def _serve(self, connection: _Connection) -> None:
        client = connection.client
        reader = _Reader(client)
        try:
            while not connection.closed:
                request = reader.read()
                if request is None:
                    break
                if not self._exchange(connection, request):
                    break
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._connections.discard(connection)
                self._threads.discard(threading.current_thread())
            if connection.closed:
                _reset(client)
            else:
                _close(client)

    def _exchange(self, connection: _Connection, request: _Message) -> bool:
        """Handle one request; return whether the client connection stays open."""
        arrived = time.time()
        action, fields = _describe(request)
        queue_url = str(fields.get("QueueUrl") or fields.get("QueueName") or "")
        fault, before, after, rule = self._decide(action, queue_url)
        if before:
            self._closing.wait(before)
        if fault in _CANNED or fault is Fault.ERROR:
            if after:
                self._closing.wait(after)
            self._note(arrived, action, fields, fault, None, None)
            connection.client.sendall(self._error_response(fault, rule))
            return True
        if fault is Fault.RESET:
            self._note(arrived, action, fields, fault, None, None)
            connection.closed = True
            return False
        response = self._forward(connection, request)
        if response is None:
            connection.closed = True
            return False
        status = _status(response)
        parsed = None
        if self._keep_journal and action == "ReceiveMessage":
            with contextlib.suppress(ValueError):
                parsed = json.loads(response.body or b"{}")
        if fault is Fault.DROP_RESPONSE:
            self._note(arrived, action, fields, fault, status, parsed)
            connection.closed = True
            return False
        if after:
            self._closing.wait(after)
        self._note(arrived, action, fields, fault, status, parsed)
        connection.client.sendall(response.raw)
        return "close" not in response.headers.get("connection", "").lower()

    def _decide(
        self, action: str, queue_url: str
    ) -> tuple[Fault | None, float, float, Rule | None]:
        """Draw the faults for one request: (fault, delay before, delay after, rule)."""
        before = after = 0.0
        chosen: Fault | None = None
        chosen_rule: Rule | None = None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(action, queue_url):
                    continue
                if self._random.random() >= rule.probability:
                    continue
                if rule.fault in LATENCY_FAULTS:
                    rule.applied += 1
                    seconds = self._random.uniform(*rule.delay)
                    if rule.fault is Fault.DELAY:
                        before += seconds
                    else:
                        after += seconds
                    if chosen is None:
                        chosen = rule.fault
                elif chosen is None or chosen in LATENCY_FAULTS:
                    rule.applied += 1
                    chosen, chosen_rule = rule.fault, rule
                    break
        return chosen, before, after, chosen_rule

    def _forward(self, connection: _Connection, request: _Message) -> _Message | None:
        """Send the request upstream on a fresh connection; return the response."""
        try:
            upstream = socket.create_connection(self._upstream, timeout=10)
        except OSError:
            return None
        upstream.settimeout(None)
        connection.upstream = upstream
        try:
            if connection.closed:
                return None
            upstream.sendall(request.raw)
            return _Reader(upstream).read(is_response=True)
        except (OSError, ValueError):
            return None
        finally:
            connection.upstream = None
            _close(upstream)

    def _note(
        self,
        arrived: float,
        action: str,
        request: dict[str, t.Any],
        fault: Fault | None,
        status: int | None,
        response: dict[str, t.Any] | None,
    ) -> None:
        with self._lock:
            self.counts[(action, "ok" if fault is None else fault.value)] += 1
            if self._keep_journal:
                self.journal.append(
                    Exchange(
                        arrived, time.time(), action, request, fault, status, response
                    )
                )

    def _error_response(self, fault: Fault, rule: Rule | None) -> bytes:
        if fault is Fault.ERROR and rule is not None:
            status, code = rule.status, rule.code
            query = f"{code};Sender"
            message = f"injected {code}"
        else:
            status, code, query, message = _CANNED[fault]
        body = json.dumps(
            {"__type": f"com.amazonaws.sqs#{code}", "message": message}
        ).encode()
        headers = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            "Content-Type: application/x-amz-json-1.0",
            f"x-amzn-RequestId: {uuid.uuid4()}",
            f"Content-Length: {len(body)}",
        ]
        if query:
            headers.append(f"x-amzn-query-error: {query}")
        return ("\r\n".join(headers) + "\r\n\r\n").encode("latin-1") + body


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _describe(request: _Message) -> tuple[str, dict[str, t.Any]]:
    """The SQS action of a request and its parameters."""
    target = request.headers.get("x-amz-target", "")
    if target:
        try:
            fields = json.loads(request.body or b"{}")
        except ValueError:
            fields = {}
        return target.rsplit(".", 1)[-1], fields if isinstance(fields, dict) else {}
    form = urllib.parse.parse_qs(request.body.decode("latin-1"))
    flat = {key: values[0] for key, values in form.items()}
    return flat.get("Action", ""), flat


def _status(response: _Message) -> int | None:
    try:
        return int(response.start_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        return None


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a crashed peer would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
