"""What an AWS call's failure says: its error code, and what that code means here.

Every module of the project reads a botocore error's code through
:func:`aws_error_code`; the calls that answer per entry (batch requests, group
commits) hand their failures on as a :data:`CallError`.
"""

from __future__ import annotations

import typing as t

#: ``(code, message)`` of a failed call, or None when it succeeded.
CallError: t.TypeAlias = tuple[str, str] | None

#: Errors meaning "this receipt handle no longer owns the message": it was
#: redelivered, deleted or timed out. Servers differ in which one they send.
LOST_OWNERSHIP_CODES = frozenset(
    {
        "ReceiptHandleIsInvalid",
        "MessageNotInflight",
        "AWS.SimpleQueueService.MessageNotInflight",
        "InvalidParameterValue",
    }
)

#: Error codes of GetQueueUrl & co. for a queue that does not exist.
QUEUE_DOES_NOT_EXIST_CODES = frozenset(
    {"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}
)


def aws_error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore error, or the exception's type name.

    SQS's JSON protocol names the legacy query code (``QueryErrorCode``,
    e.g. ``AWS.SimpleQueueService.NonExistentQueue``) beside the new one; the
    legacy one wins, as the codes this project compares with are those.
    """
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error")
        if isinstance(error, dict):
            code = error.get("QueryErrorCode") or error.get("Code")
            if isinstance(code, str) and code:
                return code
    return type(exc).__name__


def call_error(exc: BaseException) -> tuple[str, str]:
    """The :data:`CallError` of a call that raised ``exc``."""
    return aws_error_code(exc), str(exc)


def may_have_been_applied(exc: BaseException) -> bool:
    """Whether a request that raised ``exc`` may still have been applied by SQS.

    Only an answer SQS gave (an HTTP 4xx: the request was refused as it
    stood) says it was not; a timeout, a reset connection or a 5xx may hide
    a request that was applied and whose answer was lost.
    """
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return True
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return not (isinstance(status, int) and 400 <= status < 500)


def is_lost_ownership(error: CallError) -> bool:
    """Whether a failed call means the worker no longer owns the message."""
    return error is not None and error[0] in LOST_OWNERSHIP_CODES


class CallFailed(Exception):
    """A call on a queue failed with :data:`CallError` ``error``.

    What a ``worker_error`` receiver gets for a settle call (a delete, a
    visibility change) that failed without an exception of its own: batch
    requests report failures per entry.
    """

    def __init__(self, operation: str, error: tuple[str, str]) -> None:
        self.operation = operation
        #: SQS's error code and message.
        self.code, self.message = error
        super().__init__(f"{operation} failed: {self.code}: {self.message}")
