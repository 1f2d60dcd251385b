"""Running the app's jobs from an AWS Lambda SQS event source.

The handler (``make_handler``, SPEC "AWS Lambda") is not wired yet; this
package holds the translation of Lambda's SQS records into the messages the
worker's runner takes, and the FIFO rule for ``batchItemFailures``.
"""

from __future__ import annotations

from ._records import batch_item_failures
from ._records import message_of

__all__ = ["batch_item_failures", "message_of"]
