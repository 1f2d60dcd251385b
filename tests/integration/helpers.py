"""Helpers of the integration tests: producing jobs, reading what the worker ran."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import pathlib
import time
import typing as t

from flask_sqs_jobs.engine import QueueGroup

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Record: t.TypeAlias = dict[str, t.Any]


def producer(client: SQSClient, **urls: str) -> QueueGroup:
    """A :class:`QueueGroup` for enqueueing: logical name -> queue URL."""
    return QueueGroup.build(
        boto_client=client, queues={name: {"url": url} for name, url in urls.items()}
    )


def read_records(path: pathlib.Path) -> list[Record]:
    """The jobs the worker's handlers ran, in the order they finished."""
    if not path.exists():
        return []
    # A line being written right now may be incomplete: only lines that end
    # with a newline count (the last piece of the split is never one).
    lines = path.read_text().split("\n")[:-1]
    return [json.loads(line) for line in lines]


def wait_for_records(
    path: pathlib.Path, count: int, timeout: float = 15.0
) -> list[Record]:
    """Poll the record file until it holds at least ``count`` jobs; return them."""
    wait_until(
        lambda: len(read_records(path)) >= count,
        timeout,
        lambda: f"{count} recorded jobs; got {read_records(path)}",
    )
    return read_records(path)


def wait_until(
    predicate: cabc.Callable[[], bool],
    timeout: float,
    describe: cabc.Callable[[], str],
    interval: float = 0.05,
) -> None:
    """Poll ``predicate`` until it is true.

    :raises AssertionError: still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {describe()}"
            )
        time.sleep(interval)


def log_time(event: cabc.Mapping[str, t.Any]) -> float:
    """The POSIX time of a JSON log event (structlog's ISO ``timestamp``)."""
    stamp = dt.datetime.fromisoformat(str(event["timestamp"]))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()
