"""Shared by the scripts in this folder, run inside other virtualenvs (stdlib only).

The driver passes its settings as JSON in the BENCH_CONFIG environment variable.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(os.environ["BENCH_CONFIG"])
    return loaded


def quiet_structlog() -> None:
    """Log at WARNING and above only, so the INFO lines per job cost nothing."""
    import structlog

    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )


def production_structlog() -> str:
    """structlog's fastest documented production set-up: JSON lines at INFO on stdout.

    Returns the serializer used: ``orjson`` (rendering bytes for ``BytesLogger``)
    when it is installed, else the standard ``json`` module (with ``WriteLogger``).
    The same configuration is in bench/LOGGING.md, ready to copy.
    """
    import structlog

    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,  # must be first: job fields
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.dict_tracebacks,
    ]
    try:
        import orjson
    except ImportError:
        processors.append(structlog.processors.JSONRenderer())
        factory: Any = structlog.WriteLoggerFactory()
        serializer = "json"
    else:
        processors.append(structlog.processors.JSONRenderer(serializer=orjson.dumps))
        factory = structlog.BytesLoggerFactory()
        serializer = "orjson"
    structlog.configure(
        cache_logger_on_first_use=True,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=processors,
        logger_factory=factory,
    )
    return serializer


def configure_logging(cfg: dict[str, Any]) -> None:
    """BENCH_CONFIG["logging"]: ``production`` (the default) or ``quiet``."""
    if cfg.get("logging", "production") == "quiet":
        quiet_structlog()
    else:
        production_structlog()


class Counters:
    """The job handler: records its start and its end in files the driver watches."""

    def __init__(self, directory: str, sleep_ms: float, jobs: int) -> None:
        self._started = os.open(Path(directory) / "started", FLAGS, 0o644)
        self._done = os.open(Path(directory) / "done", FLAGS, 0o644)
        self._sleep = sleep_ms / 1000
        self._jobs = jobs
        self._count = 0
        self._lock = threading.Lock()
        self.all_done = threading.Event()

    def run(self, payload: object = None) -> None:
        os.write(self._started, struct.pack("<d", time.time()))
        if self._sleep:
            time.sleep(self._sleep)
        os.write(self._done, b"x")
        with self._lock:
            self._count += 1
            if self._count >= self._jobs:
                self.all_done.set()
