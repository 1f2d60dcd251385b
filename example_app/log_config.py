"""structlog set-up: readable in a terminal, JSON lines otherwise.

Configuring logging is the application's job; flask-sqs-jobs only logs.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging() -> None:
    """Render logs for a person in a terminal, as JSON for machines elsewhere."""
    renderer: structlog.typing.Processor
    if sys.stdout.isatty():
        renderer = structlog.dev.ConsoleRenderer()
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.dict_tracebacks,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.WriteLoggerFactory(),
        cache_logger_on_first_use=True,
    )
