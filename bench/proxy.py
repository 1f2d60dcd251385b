"""A counting HTTP proxy on 127.0.0.1: forwards bytes unchanged, counts SQS calls.

The action comes from the ``X-Amz-Target`` header (JSON protocol) or the ``Action``
form field (query protocol); the queue from the request body's ``QueueUrl``.

With a ``delay`` it also holds each request that long before forwarding it (uniform
in ``delay.low`` .. ``delay.high`` seconds, from a seeded generator), as an in-region
AWS call costs. Each connection has its own threads, so concurrent connections are
never serialized, and keep-alive connections stay open. ``python -m bench.proxy``
runs one in its own process (see ``main``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs
from urllib.parse import urlsplit

Key = tuple[str, str]  # (action, queue url or "")


@dataclass(frozen=True)
class Delay:
    """Seconds each request waits before it is forwarded: uniform in low..high."""

    low: float
    high: float
    seed: int = 0

    @classmethod
    def around(cls, ms: float, jitter_ms: float, seed: int = 0) -> Delay:
        return cls((ms - jitter_ms) / 1000, (ms + jitter_ms) / 1000, seed)


class CountingProxy:
    def __init__(self, upstream: str, *, delay: Delay | None = None) -> None:
        parts = urlsplit(upstream)
        self._delay = delay
        self._connections = 0
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
            for sock in (client, upstream):  # relay each write at once (no Nagle)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._connections += 1
            threading.Thread(
                target=self._requests,
                args=(client, upstream, self._rng(self._connections)),
                daemon=True,
            ).start()
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()

    def _rng(self, connection: int) -> random.Random | None:
        """One generator per connection, seeded from the seed and its number."""
        if self._delay is None:
            return None
        return random.Random(self._delay.seed * 1_000_003 + connection)

    def _requests(
        self, client: socket.socket, upstream: socket.socket, rng: random.Random | None
    ) -> None:
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
                if rng is not None and self._delay is not None:
                    time.sleep(rng.uniform(self._delay.low, self._delay.high))
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


@contextlib.contextmanager
def delaying_proxy(
    upstream: str, *, delay_ms: float, jitter_ms: float, seed: int, log_path: Path
) -> Iterator[str]:
    """A delaying proxy in its own process (so it never shares the driver's GIL).

    Yields its endpoint; stopped on the way out.
    """
    from bench import procs  # the driver's side only

    log_path.unlink(missing_ok=True)
    args = [sys.executable, "-m", "bench.proxy", upstream, "--delay-ms", str(delay_ms)]
    args += ["--jitter-ms", str(jitter_ms), "--seed", str(seed)]
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = procs.spawn(args, env=env, cwd=root, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            first = log_path.read_text(errors="replace").partition("\n")
            if first[1] and first[0].startswith("http://"):
                break
            if procs.wait(proc, 0) is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the delaying proxy did not start: {first[0]}")
            time.sleep(0.05)
        yield first[0]
    finally:
        procs.stop(proc, grace=5)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM; prints the proxy's endpoint on the first line of stdout."""
    parser = argparse.ArgumentParser(prog="python -m bench.proxy")
    parser.add_argument("upstream", help="e.g. http://127.0.0.1:4566")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    delay = None
    if args.delay_ms:
        delay = Delay.around(args.delay_ms, args.jitter_ms, args.seed)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    with CountingProxy(args.upstream, delay=delay) as proxy:
        print(proxy.endpoint, flush=True)
        while not stop.wait(1.0):
            pass
    sys.stdout.flush()


if __name__ == "__main__":
    main()
