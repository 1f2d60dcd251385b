"""The log keys a job's correlation fields may never bind."""

from __future__ import annotations

_KEYS = (
    # Bound for every job.
    "queue message_id receive_count job_type job_id sent_job_id trace_id span_id",
    # On job_started, job_finished and the engine's other job lines.
    "group_id queue_wait_ms outcome duration_ms processing_outcome error_type"
    " error reason retry_in_seconds attempt max_attempts next_attempt_at"
    " visibility_error ownership_lost dead_letter_queue run_at new_message_id"
    " dropped idempotency",
    # Acted on by structlog's processors and renderers.
    "event level log_level timestamp logger logger_name exception exc_info"
    " stack stack_info positional_args",
    # Attributes of logging.LogRecord.
    "name msg args levelname levelno pathname filename module exc_text lineno"
    " funcName created msecs relativeCreated thread threadName processName"
    " process taskName message asctime",
)

#: Log keys correlation fields never bind: the keys the engine binds for every
#: job or puts on its own job lines, the keys structlog's processors and
#: renderers act on, and the attributes of a stdlib ``LogRecord`` (which
#: ``logging`` refuses to overwrite).
RESERVED_LOG_KEYS = frozenset(key for keys in _KEYS for key in keys.split())
