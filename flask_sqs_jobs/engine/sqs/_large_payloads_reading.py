"""Reading an offloaded body from S3 within bounds, and judging what was read.

A worker never holds more of an object than it may: the size the pointer
announces (``ExtendedPayloadSize``) and the ``ContentLength`` S3 answers are
checked before reading, and the body is read in chunks up to one byte past
the limit, so a server that lies about the length cannot make the worker read
more. Everything that no retry can fix (too large, not UTF-8, not a job, a
pointer outside the bucket or prefix) is a :class:`NonRetryableError` with a
reason; only S3's own errors (network, throttling, 5xx, access) are retried.
"""

from __future__ import annotations

import contextlib
import typing as t

from ._errors import aws_error_code
from ._large_payloads import LargePayloads
from ._large_payloads import NOT_FOUND_CODES
from ._large_payloads import PayloadNotFound
from ._large_payloads import PayloadTooLarge
from ._large_payloads import PayloadUnreadable
from ._large_payloads import Pointer
from ._large_payloads import PointerRefused
from ._wire import decode_body
from ._wire import DecodedBody

#: What one read of the body stream asks for.
CHUNK_BYTES = 256 * 1024


def fetch_job(large: LargePayloads, pointer: Pointer) -> DecodedBody:
    """The job stored at ``pointer``.

    :raises PointerRefused: the pointer is outside the bucket or prefix
        (nothing is read).
    :raises PayloadNotFound: the object does not exist.
    :raises PayloadTooLarge: it is larger than ``max_bytes`` or than announced.
    :raises PayloadUnreadable: it is not UTF-8, or not a job body.
    :raises Exception: any other S3 error (the message is retried).
    """
    text = fetch_text(large, pointer)
    decoded = decode_body(text)
    if isinstance(decoded, str):
        raise PayloadUnreadable(f"{large.describe(pointer)}: {decoded}")
    return decoded


def fetch_text(large: LargePayloads, pointer: Pointer) -> str:
    """The text stored at ``pointer``, read within bounds (see :func:`fetch_job`)."""
    refused = large.refusal(pointer)
    if refused is not None:
        raise PointerRefused(f"{large.describe(pointer)}: {refused}")
    data = read_bounded(large, pointer)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise PayloadUnreadable(
            f"{large.describe(pointer)} is not UTF-8 text (invalid byte at"
            f" offset {exc.start:,})"
        ) from None


def read_bounded(large: LargePayloads, pointer: Pointer) -> bytearray:
    """The object's bytes, never reading more than the limit plus one byte."""
    where = large.describe(pointer)
    announced = pointer.size if pointer.size is not None and pointer.size >= 0 else None
    if announced is not None and announced > large.max_bytes:
        raise PayloadTooLarge(
            f"{where} is announced as {announced:,} bytes, more than max_bytes"
            f" ({large.max_bytes:,}); it was not read"
        )
    if announced is None:
        limit, bound = large.max_bytes, f"max_bytes ({large.max_bytes:,})"
    else:
        limit, bound = announced, f"its pointer announces ({announced:,} bytes)"
    try:
        response = large.s3_client.get_object(Bucket=pointer.bucket, Key=pointer.key)
    except Exception as exc:
        if aws_error_code(exc) in NOT_FOUND_CODES:
            raise PayloadNotFound(f"{where} does not exist") from exc
        raise
    body = response["Body"]
    try:
        length = response.get("ContentLength")
        if isinstance(length, int) and length > limit:
            raise PayloadTooLarge(
                f"{where} is {length:,} bytes, more than {bound}; it was not read"
            )
        data = _read_at_most(body, limit + 1)
    finally:
        _close(body)
    if len(data) > limit:
        said = f", although S3 said {length:,}" if isinstance(length, int) else ""
        raise PayloadTooLarge(
            f"{where} holds more bytes than {bound}{said}; it was not read whole"
        )
    return data


def _read_at_most(body: t.Any, most: int) -> bytearray:
    """Read up to ``most`` bytes from a stream, a chunk at a time."""
    data = bytearray()
    while len(data) < most:
        chunk = body.read(min(CHUNK_BYTES, most - len(data)))
        if not chunk:
            break
        data += chunk[: most - len(data)]
    return data


def _close(body: t.Any) -> None:
    """Close the stream, dropping its connection if it was not read to the end."""
    close = getattr(body, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
