"""Running the app's jobs from an AWS Lambda SQS event source.

``make_handler`` (SPEC "AWS Lambda") makes the function's handler: each
record runs through the worker's own processing, and the response's
``batchItemFailures`` names the records that must come back.
"""

from __future__ import annotations

from ._handler import LambdaHandler
from ._handler import make_handler
from ._records import batch_item_failures
from ._records import message_of
from ._sources import UnknownEventSource

__all__ = [
    "LambdaHandler",
    "UnknownEventSource",
    "batch_item_failures",
    "make_handler",
    "message_of",
]
