"""The job model: what producers, middleware, handlers and hooks see.

The job, ``current_job``, outcomes, the exception tree, handlers, middleware,
hooks, retry policies, job ids, and the protocols the rest of the engine
implements (idempotency keys, job sessions). Imports nothing else of the engine.
"""

from __future__ import annotations

from ._current import current_job
from ._current import reset_current_job
from ._current import set_current_job
from ._exceptions import EnqueueBatchError
from ._exceptions import IdempotencyConflictError
from ._exceptions import NonRetryableError
from ._exceptions import QueueNotFoundError
from ._exceptions import RetryJob
from ._exceptions import SQSJobsError
from ._exceptions import UnknownQueueError
from ._exit_status import EXIT_CRASHED
from ._exit_status import EXIT_OK
from ._exit_status import EXIT_RECEIVE_FAILURES
from ._exit_status import EXIT_RECYCLED
from ._exit_status import EXIT_SQS_ERROR
from ._exit_status import EXIT_USAGE
from ._handlers import as_job_handler
from ._handlers import call_handler
from ._handlers import check_idempotency
from ._handlers import close_thread_loop
from ._handlers import DEFAULT_IDEMPOTENCY_TTL_SECONDS
from ._handlers import GLOBAL_SCOPE
from ._handlers import HandlerFunc
from ._handlers import JOB_TYPE_SCOPE
from ._handlers import JobHandler
from ._handlers import KeyFunc
from ._hooks import ErrorKind
from ._hooks import Hooks
from ._idempotency_keys import Claim
from ._idempotency_keys import ClaimState
from ._idempotency_keys import fingerprint_of
from ._idempotency_keys import IdempotencyKeys
from ._idempotency_keys import key_of
from ._idempotency_keys import MAX_KEY_LENGTH
from ._idempotency_keys import MAX_RESULT_BYTES
from ._idempotency_keys import payload_fingerprint
from ._idempotency_keys import stored_key
from ._isolation import call_hook
from ._job import Job
from ._job import JSONObject
from ._job_ids import check_job_id
from ._job_ids import is_job_id
from ._job_ids import new_job_id
from ._job_ids import received_job_id
from ._job_ids import shown_job_id
from ._job_runtime import JobRuntime
from ._job_runtime import Renewal
from ._job_session import JobSession
from ._job_session import SessionFactory
from ._limits import check_job_runtime
from ._limits import check_worker_options
from ._limits import DEFAULT_MAX_MESSAGE_SIZE
from ._limits import is_finite_number
from ._limits import is_int_in
from ._limits import job_runtime_problem
from ._limits import MAX_BATCH_ENTRIES
from ._limits import MAX_DEFERRAL_SECONDS
from ._limits import MAX_DELAY_SECONDS
from ._limits import MAX_ID_LENGTH
from ._limits import MAX_JOB_RUNTIME_SECONDS
from ._limits import MAX_MESSAGE_ATTRIBUTES
from ._limits import MAX_QUEUE_NAME_LENGTH
from ._limits import MAX_VISIBILITY_TIMEOUT
from ._limits import MAX_WAIT_SECONDS
from ._limits import runtime_limit
from ._log_keys import RESERVED_LOG_KEYS
from ._middleware import check_single_trace_injector
from ._middleware import compose_consume
from ._middleware import compose_poll
from ._middleware import compose_produce
from ._middleware import JobMiddleware
from ._middleware import reset_trace_injectors
from ._multi_hooks import as_multi
from ._multi_hooks import MultiHooks
from ._multi_hooks import overrides
from ._multi_hooks import report_error
from ._outcome import Outcome
from ._progress import ProgressSink
from ._retry import judge
from ._retry import max_attempts
from ._retry import Retry
from ._retry import Verdict
from ._services import running
from ._services import WorkerService
from ._worker_counts import WorkerCounts
from .untrusted import escape
from .untrusted import is_unreadable
from .untrusted import loads_shown
from .untrusted import loggable_text
from .untrusted import shown
from .untrusted import trim_correlation_fields
from .untrusted import UNREADABLE

__all__ = [
    "RESERVED_LOG_KEYS",
    "WorkerCounts",
    "WorkerService",
    "running",
    "EXIT_USAGE",
    "EXIT_SQS_ERROR",
    "EXIT_RECEIVE_FAILURES",
    "EXIT_RECYCLED",
    "EXIT_OK",
    "EXIT_CRASHED",
    "reset_trace_injectors",
    "JOB_TYPE_SCOPE",
    "GLOBAL_SCOPE",
    "loads_shown",
    "shown",
    "UNREADABLE",
    "is_unreadable",
    "MAX_QUEUE_NAME_LENGTH",
    "Claim",
    "ClaimState",
    "DEFAULT_IDEMPOTENCY_TTL_SECONDS",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EnqueueBatchError",
    "ErrorKind",
    "HandlerFunc",
    "Hooks",
    "IdempotencyConflictError",
    "IdempotencyKeys",
    "JSONObject",
    "Job",
    "JobHandler",
    "JobMiddleware",
    "JobRuntime",
    "JobSession",
    "KeyFunc",
    "MAX_BATCH_ENTRIES",
    "MAX_DEFERRAL_SECONDS",
    "MAX_DELAY_SECONDS",
    "MAX_ID_LENGTH",
    "MAX_JOB_RUNTIME_SECONDS",
    "MAX_MESSAGE_ATTRIBUTES",
    "MAX_RESULT_BYTES",
    "MAX_KEY_LENGTH",
    "fingerprint_of",
    "key_of",
    "stored_key",
    "MAX_VISIBILITY_TIMEOUT",
    "MAX_WAIT_SECONDS",
    "MultiHooks",
    "NonRetryableError",
    "Outcome",
    "ProgressSink",
    "QueueNotFoundError",
    "Renewal",
    "Retry",
    "RetryJob",
    "SQSJobsError",
    "SessionFactory",
    "UnknownQueueError",
    "Verdict",
    "as_job_handler",
    "as_multi",
    "call_handler",
    "call_hook",
    "check_idempotency",
    "check_job_id",
    "check_job_runtime",
    "check_worker_options",
    "check_single_trace_injector",
    "close_thread_loop",
    "compose_consume",
    "compose_poll",
    "compose_produce",
    "current_job",
    "escape",
    "is_finite_number",
    "is_int_in",
    "is_job_id",
    "job_runtime_problem",
    "judge",
    "loggable_text",
    "max_attempts",
    "new_job_id",
    "overrides",
    "payload_fingerprint",
    "received_job_id",
    "report_error",
    "reset_current_job",
    "runtime_limit",
    "set_current_job",
    "shown_job_id",
    "trim_correlation_fields",
]
