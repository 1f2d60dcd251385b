"""Whether the event source mapping reads ``batchItemFailures`` at all.

Without ``ReportBatchItemFailures`` in the mapping's ``FunctionResponseTypes``
Lambda ignores the response: a batch that returns is deleted whole, the
records reported included. Nothing in the event says so, so the first time
this environment reports a record, the handler asks Lambda (one
ListEventSourceMappings call, needing ``lambda:ListEventSourceMappings``) and
logs a warning when the setting is missing, or when it could not ask.
"""

from __future__ import annotations

import threading
import typing as t

import structlog

log = structlog.get_logger(__name__)

#: The FunctionResponseTypes value the handler's response needs.
REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


class MappingCheck:
    """Ask once per execution environment, on the first reported record.

    :param client: a boto3 Lambda client, or a callable making one (on first
        use, so environments that never report one never make it).
    """

    def __init__(self, client: t.Callable[[], t.Any]) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._done = False

    def after_failures(self, arn: str, context: object) -> None:
        """Check the mapping of ``arn`` to this function, unless done already."""
        with self._lock:
            if self._done:
                return
            self._done = True
        function = getattr(context, "invoked_function_arn", None) or getattr(
            context, "function_name", None
        )
        if not isinstance(function, str):
            return  # not in Lambda (a test calling the handler): nothing to ask
        try:
            mappings = self._client().list_event_source_mappings(
                EventSourceArn=arn, FunctionName=function
            )["EventSourceMappings"]
        except Exception as exc:
            log.warning(
                "lambda_mapping_unchecked",
                event_source=arn,
                error=f"{type(exc).__name__}: {exc}",
                hint="without ReportBatchItemFailures in the event source mapping's"
                " FunctionResponseTypes, Lambda deletes the records this handler"
                " reports as failed; allow lambda:ListEventSourceMappings to have"
                " this checked, or pass make_handler(..., check_mapping=False)",
            )
            return
        missing = [
            m.get("UUID")
            for m in mappings
            if REPORT_BATCH_ITEM_FAILURES not in (m.get("FunctionResponseTypes") or [])
        ]
        if missing:
            log.warning(
                "lambda_batch_failures_ignored",
                event_source=arn,
                mappings=missing,
                hint="the event source mapping lacks ReportBatchItemFailures in its"
                " FunctionResponseTypes, so Lambda deletes the records this"
                " handler reports as failed (retries and unknown job types are"
                " lost); set FunctionResponseTypes=[ReportBatchItemFailures]",
            )
