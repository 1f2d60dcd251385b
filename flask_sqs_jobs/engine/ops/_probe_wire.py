"""The probe server's HTTP: reading a request head, writing an answer."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import http

#: Bytes of request line and headers at most.
MAX_REQUEST_BYTES = 8192


@dataclasses.dataclass(frozen=True)
class Reply:
    """An answer: status, body and content type (plus extra headers)."""

    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: tuple[tuple[str, str], ...] = ()


#: Answers the path (without the query) of a ``GET``.
Handler = cabc.Callable[[str], Reply]


def error_reply(status: int, message: str, allow: bool = False) -> Reply:
    """A plain-text error answer (``allow``: say which methods are allowed)."""
    headers = (("Allow", "GET, HEAD"),) if allow else ()
    return Reply(status, f"{message}\n".encode(), "text/plain", headers)


def read_request(received: bytes) -> tuple[str, str] | Reply | None:
    """``(method, path)`` of a complete request head, the error answer to a
    bad one, or None while the head is incomplete."""
    end = received.find(b"\r\n\r\n")
    if end < 0:
        end = received.find(b"\n\n")
    if end < 0 and len(received) <= MAX_REQUEST_BYTES:
        return None
    if end < 0 or end > MAX_REQUEST_BYTES:
        return error_reply(431, "request header fields too large")
    parts = received[:end].split(b"\n", 1)[0].decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return error_reply(400, "bad request")
    method, target, _version = parts
    if method not in ("GET", "HEAD"):
        return error_reply(405, "only GET and HEAD", allow=True)
    if not target.startswith("/"):
        return error_reply(400, "bad request target")
    return method, target.split("?", 1)[0]


def encode_reply(reply: Reply, *, head_only: bool) -> bytes:
    """The bytes of ``reply``, closing the connection (no body for ``HEAD``)."""
    phrase = http.HTTPStatus(reply.status).phrase
    lines = [
        f"HTTP/1.1 {reply.status} {phrase}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in reply.headers),
    ]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return data if head_only else data + reply.body
