"""SQS calls and the wire format.

One queue's settings and every call on it (``SqsQueue``), queue definitions,
message bodies and attributes with SQS's quotas, group-committed batch calls,
and large payloads through S3.
"""

from __future__ import annotations

from ._definitions import add_name_prefix
from ._definitions import parse_queue_definitions
from ._definitions import priority_levels
from ._definitions import QueueDefinition
from ._errors import aws_error_code
from ._errors import call_error
from ._errors import CallError
from ._errors import CallFailed
from ._errors import is_lost_ownership
from ._errors import may_have_been_applied
from ._errors import QUEUE_DOES_NOT_EXIST_CODES
from ._fresh_copies import ATTEMPTS as OFFLOADED_SEND_ATTEMPTS
from ._fresh_copies import ReuploadFailed
from ._fresh_copies import send_fresh_copies
from ._large_payloads import LargePayloads
from ._large_payloads import offloaded_size
from ._large_payloads import PayloadNotFound
from ._large_payloads import PayloadTooLarge
from ._large_payloads import PayloadUnreadable
from ._large_payloads import Pointer
from ._large_payloads import POINTER_ATTRIBUTES
from ._large_payloads import PointerRefused
from ._large_payloads import S3Client
from ._large_payloads_options import check_settings
from ._large_payloads_reading import fetch_job
from ._message_attributes import check_message_attributes
from ._named_queues import NamedQueues
from ._offloading import after_delete
from ._offloading import check_room
from ._offloading import discard_unsent
from ._offloading import offload
from ._offloading import offload_entries
from ._offloading import send
from ._offloading import warn_prefix_only
from ._priorities import level_name
from ._priorities import MAX_PRIORITY_LEVELS
from ._priorities import priority_queue
from ._queue import SqsQueue
from ._result_json import read_result
from ._result_json import result_json
from ._result_json import ResultNotKept
from ._tags import check_tags
from ._tags import MAX_TAG_LENGTH
from ._tags import MAX_TAGS
from ._tags import received_tags
from ._wire import build_attributes
from ._wire import CORRELATION_FIELDS_ATTRIBUTE
from ._wire import DEAD_LETTER_ATTRIBUTE
from ._wire import decode_attributes
from ._wire import decode_body
from ._wire import DecodedBody
from ._wire import dump_json
from ._wire import encode_body
from ._wire import MALFORMED_BODY_CODES
from ._wire import MAX_JSON_DEPTH
from ._wire import message_size
from ._wire import MessageAttributes
from ._wire import nested_deeper_than
from ._wire import scheduled_for
from ._wire import string_attribute
from ._wire_times import format_utc
from ._wire_times import parse_run_at

__all__ = [
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "check_tags",
    "received_tags",
    "read_result",
    "ResultNotKept",
    "result_json",
    "nested_deeper_than",
    "MAX_JSON_DEPTH",
    "MALFORMED_BODY_CODES",
    "add_name_prefix",
    "CORRELATION_FIELDS_ATTRIBUTE",
    "CallError",
    "CallFailed",
    "DEAD_LETTER_ATTRIBUTE",
    "DecodedBody",
    "LargePayloads",
    "MessageAttributes",
    "NamedQueues",
    "POINTER_ATTRIBUTES",
    "PayloadTooLarge",
    "PayloadUnreadable",
    "PointerRefused",
    "PayloadNotFound",
    "Pointer",
    "QUEUE_DOES_NOT_EXIST_CODES",
    "QueueDefinition",
    "S3Client",
    "SqsQueue",
    "after_delete",
    "aws_error_code",
    "build_attributes",
    "call_error",
    "may_have_been_applied",
    "OFFLOADED_SEND_ATTEMPTS",
    "ReuploadFailed",
    "send_fresh_copies",
    "check_message_attributes",
    "check_room",
    "check_settings",
    "decode_attributes",
    "decode_body",
    "discard_unsent",
    "offload",
    "dump_json",
    "encode_body",
    "fetch_job",
    "format_utc",
    "is_lost_ownership",
    "message_size",
    "offload_entries",
    "offloaded_size",
    "parse_queue_definitions",
    "parse_run_at",
    "level_name",
    "MAX_PRIORITY_LEVELS",
    "priority_levels",
    "priority_queue",
    "scheduled_for",
    "send",
    "string_attribute",
    "warn_prefix_only",
]
