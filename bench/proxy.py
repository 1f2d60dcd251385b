"""A counting HTTP proxy on 127.0.0.1: forwards bytes unchanged, counts SQS calls.

The action comes from the ``X-Amz-Target`` header (JSON protocol) or the ``Action``
form field (query protocol); the queue from the request body's ``QueueUrl``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import Counter
from types import TracebackType
from urllib.parse import parse_qs
from urllib.parse import urlsplit

Key = tuple[str, str]  # (action, queue url or "")


class CountingProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._counts: Counter[Key] = Counter()
        self._lock = threading.Lock()
        self._closed = False
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> CountingProxy:
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def __exit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        self._closed = True
        self._listener.close()

    def snapshot(self) -> Counter[Key]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(
                target=self._requests, args=(client, upstream), daemon=True
            ).start()
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client -> server: parse each request, count it, forward it unchanged."""
        buffer = b""
        try:
            while True:
                head_end = buffer.find(b"\r\n\r\n")
                if head_end < 0:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                    continue
                head = buffer[:head_end].decode("latin-1")
                headers = _headers(head)
                if "chunked" in headers.get("transfer-encoding", ""):
                    upstream.sendall(
                        buffer
                    )  # not used by SQS clients: forward raw, stop counting
                    _pipe(client, upstream)
                    return
                total = head_end + 4 + int(headers.get("content-length", "0"))
                while len(buffer) < total:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                self._count(headers, buffer[head_end + 4 : total])
                upstream.sendall(buffer[:total])
                buffer = buffer[total:]
        except OSError:
            return
        finally:
            _close(client, upstream)

    def _count(self, headers: dict[str, str], body: bytes) -> None:
        action, queue = "", ""
        target = headers.get("x-amz-target", "")
        if target:
            action = target.rsplit(".", 1)[-1]
            with contextlib.suppress(ValueError):
                queue = str(json.loads(body or b"{}").get("QueueUrl", ""))
        else:
            form = parse_qs(body.decode("latin-1"))
            action = form.get("Action", [""])[0]
            queue = form.get("QueueUrl", [""])[0]
        with self._lock:
            self._counts[(action, queue)] += 1


def _headers(head: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source, sink)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
