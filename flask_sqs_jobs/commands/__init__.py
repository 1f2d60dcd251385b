"""The command-line layer: ``flask sqs-worker`` and ``flask sqs-jobs`` subcommands."""

from __future__ import annotations

from ._admin import create_queues
from ._admin import run_local_server
from ._common import check_queue_names
from ._common import ConfigurationError
from ._common import current_app_and_parts
from ._common import current_parts
from ._common import dead_letter_queue_of
from ._common import logs_off_stdout
from ._common import option
from ._common import queue_named
from ._common import sqs_errors
from ._common import table
from ._dlq import dlq_command
from ._outbox import outbox_command
from ._records import cancel_command
from ._records import job_command
from ._records import workers_command
from ._schedules import schedules_command
from ._store import store_command
from ._worker import worker_command
from ._workflows import batch_command

__all__ = [
    "batch_command",
    "cancel_command",
    "ConfigurationError",
    "check_queue_names",
    "create_queues",
    "current_app_and_parts",
    "current_parts",
    "dead_letter_queue_of",
    "dlq_command",
    "job_command",
    "logs_off_stdout",
    "option",
    "outbox_command",
    "queue_named",
    "run_local_server",
    "schedules_command",
    "sqs_errors",
    "store_command",
    "table",
    "worker_command",
    "workers_command",
]
