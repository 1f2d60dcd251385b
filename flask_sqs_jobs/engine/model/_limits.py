"""The numbers everything is checked against: SQS's quotas and the engine's own bounds.

Quotas: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
"""

from __future__ import annotations

import math

#: Message attributes SQS accepts on one message.
MAX_MESSAGE_ATTRIBUTES = 10
#: The longest per-message delay SQS accepts (15 minutes).
MAX_DELAY_SECONDS = 900
#: The longest visibility timeout SQS accepts (12 hours).
MAX_VISIBILITY_TIMEOUT = 43_200
#: The longest long-poll wait SQS accepts.
MAX_WAIT_SECONDS = 20
#: Entries in one SendMessageBatch, DeleteMessageBatch or
#: ChangeMessageVisibilityBatch request, and messages in one ReceiveMessage.
MAX_BATCH_ENTRIES = 10
#: The longest queue name SQS accepts, the ``.fifo`` suffix included.
MAX_QUEUE_NAME_LENGTH = 80
#: The queue default for MaximumMessageSize (1 MiB), used when the queue's own
#: setting cannot be read.
DEFAULT_MAX_MESSAGE_SIZE = 1_048_576
#: The longest MessageGroupId / MessageDeduplicationId SQS accepts.
MAX_ID_LENGTH = 128
#: How far ahead a job may be deferred (``run_at`` or ``delay_seconds``): one
#: year. A deferred job is re-sent every 15 minutes until due, so a date
#: decades ahead (a unit mix-up, milliseconds for seconds) would cost SQS
#: calls for ever instead of failing where it was made.
MAX_DEFERRAL_SECONDS = 365 * 24 * 3600


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is an int or float (not a bool) that is a finite float.

    NaN compares false with everything, so it would slip past every range
    check (a NaN runtime limit never fires); infinities and ints too large for
    a float overflow the arithmetic done with them.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
