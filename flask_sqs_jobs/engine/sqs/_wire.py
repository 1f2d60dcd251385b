"""The wire format: message bodies and attributes, and the SQS quotas they obey.

A job travels as a JSON body ``{"job_type": "...", "payload": {...}, "job_id":
"..."}`` (plus an optional ``run_at`` for deferral, ``max_runtime_seconds``
for the job's own runtime limit, ``expires_at`` and ``tags``), one String attribute
``correlation_fields`` holding a JSON object, and one String attribute per
trace header. Any language may produce it; ``docs/wire-format.md`` is the reference.

Quotas: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import re
import typing as t
from json.encoder import encode_basestring

from ..model import JSONObject
from ..model import MAX_MESSAGE_ATTRIBUTES
from ._tags import received_tags
from ._tags import TAGS
from ._wire_times import format_utc
from ._wire_times import parse_run_at

#: How deeply a payload (and a job's result, and the correlation fields) may
#: nest objects and arrays, the payload object itself being level 1. Enqueue
#: refuses a deeper payload; the worker refuses a deeper body as malformed
#: before decoding it, so neither depends on the interpreter's recursion limit.
MAX_JSON_DEPTH = 512
#: A body holds its payload one level down.
MAX_BODY_DEPTH = MAX_JSON_DEPTH + 1
#: Why a body nested deeper than :data:`MAX_BODY_DEPTH` is not a job.
BODY_TOO_DEEP = f"body is nested more than {MAX_BODY_DEPTH} levels deep"

CORRELATION_FIELDS_ATTRIBUTE = "correlation_fields"
DEAD_LETTER_ATTRIBUTE = "dead_letter"
#: A periodic job's tick (attribute or body key); see docs/wire-format.md.
SCHEDULED_FOR = "scheduled_for"
#: A unique job's key and when it is freed: ``{"key": ..., "until": ...}``.
UNIQUE = "unique"
#: The body key of a job's own runtime limit, in seconds.
MAX_RUNTIME = "max_runtime_seconds"
#: The body key of the time after which a job is deleted unrun (ISO 8601, UTC).
EXPIRES_AT = "expires_at"
#: Every message's String attribute naming its job type (for consoles and filters).
JOB_TYPE_ATTRIBUTE = "job_type"
_RESERVED_ATTRIBUTES = frozenset(
    {
        CORRELATION_FIELDS_ATTRIBUTE,
        DEAD_LETTER_ATTRIBUTE,
        SCHEDULED_FOR,
        JOB_TYPE_ATTRIBUTE,
    }
)

# Characters SQS refuses in a body or a String attribute (surrogates and the
# two non-characters); everything else JSON leaves unescaped is allowed.
_SQS_INVALID_CHARS = re.compile("[\ud800-\udfff\ufffe\uffff]")

MessageAttributes: t.TypeAlias = dict[str, dict[str, t.Any]]

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nested_deeper_than(text: str, depth: int) -> bool:
    """Whether the JSON ``text`` nests objects and arrays more than ``depth`` deep.

    Counted without recursion and without decoding (brackets inside strings do
    not count), in C-speed passes: a text with few brackets costs two counts.
    """
    if text.count("[") + text.count("{") <= depth:
        return False
    brackets = _BRACKET.findall(_JSON_STRING.sub("", text))
    return (
        max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > depth
    )


def loads_bounded(text: str, depth: int = MAX_JSON_DEPTH) -> t.Any:
    """Decode JSON ``text`` nested at most ``depth`` deep.

    :raises ValueError: it is not JSON, or is nested deeper.
    """
    if nested_deeper_than(text, depth):
        raise ValueError(f"nested more than {depth} levels deep")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"nested too deeply to decode (at most {depth})") from None


def dump_json(value: object) -> str:
    """Serialise ``value`` as compact JSON whose every character SQS accepts.

    :raises TypeError: a value is not JSON-serialisable.
    :raises ValueError: a float is NaN or infinite (not valid JSON).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Every character SQS refuses is outside ASCII; the check is C-fast.
    if not text.isascii() and _SQS_INVALID_CHARS.search(text):
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text


def encode_body(
    job_type: str,
    payload: JSONObject,
    run_at: dt.datetime | None = None,
    job_id: str | None = None,
    *,
    payload_json: str | None = None,
    max_runtime_seconds: float | None = None,
    unique: tuple[str, str] | None = None,
    expires_at: dt.datetime | None = None,
    tags: tuple[str, ...] = (),
) -> str:
    """Return the message body for a job.

    ``payload_json`` is ``dump_json(payload)`` when the caller has it already
    (the enqueue checks encoded the payload): the body is then put together
    around it instead of serialising the payload again, and is the same text
    :func:`dump_json` would write for the whole body.
    """
    if payload_json is not None:
        joined = _join_body(job_type, payload_json, run_at, job_id)
        if joined is not None and max_runtime_seconds is not None:
            joined = f'{joined[:-1]},"{MAX_RUNTIME}":{float(max_runtime_seconds)!r}}}'
        if joined is not None and expires_at is not None:
            joined = f'{joined[:-1]},"{EXPIRES_AT}":"{format_utc(expires_at)}"}}'
        if joined is not None and unique is None and not tags:
            return joined
    body: JSONObject = {"job_type": job_type, "payload": payload}
    if job_id is not None:
        body["job_id"] = job_id
    if run_at is not None:
        body["run_at"] = format_utc(run_at)
    if max_runtime_seconds is not None:
        body[MAX_RUNTIME] = float(max_runtime_seconds)
    if unique is not None:
        body[UNIQUE] = {"key": unique[0], "until": unique[1]}
    if expires_at is not None:
        body[EXPIRES_AT] = format_utc(expires_at)
    if tags:
        body[TAGS] = list(tags)
    return dump_json(body)


def _join_body(
    job_type: str, payload_json: str, run_at: dt.datetime | None, job_id: str | None
) -> str | None:
    """The body around an encoded payload, or None where only a whole dump is exact.

    :func:`dump_json` escapes a whole body to ASCII when any part of it holds
    a character SQS refuses; a part that was escaped (or holds any ``\\u``
    escape) sends the caller back to the whole dump, so the text is the same
    either way.
    """
    type_json = encode_basestring(job_type)
    if "\\u" in payload_json or "\\u" in type_json:
        return None
    if not type_json.isascii() and _SQS_INVALID_CHARS.search(type_json):
        return None
    body = f'{{"job_type":{type_json},"payload":{payload_json}'
    if job_id is not None:
        body += f',"job_id":{encode_basestring(job_id)}'
    if run_at is not None:
        body += f',"run_at":"{format_utc(run_at)}"'
    return body + "}"


def string_attribute(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def build_attributes(
    correlation_fields: JSONObject,
    trace_headers: dict[str, str],
    caller_attributes: MessageAttributes | None,
    job_type: str | None = None,
) -> tuple[MessageAttributes, list[str]]:
    """Merge propagation attributes with the caller's, within the SQS limit.

    The caller's attributes win. Propagation attributes (``correlation_fields``
    first, then each trace header, then ``job_type``) are dropped from the end
    until at most :data:`MAX_MESSAGE_ATTRIBUTES` remain; their names are
    returned.
    """
    caller = caller_attributes or {}
    propagation: MessageAttributes = {}
    fields = {k: v for k, v in correlation_fields.items() if v is not None}
    if fields:
        propagation[CORRELATION_FIELDS_ATTRIBUTE] = string_attribute(dump_json(fields))
    for name, value in trace_headers.items():
        if value and name not in _RESERVED_ATTRIBUTES:
            propagation[name] = string_attribute(str(value))
    if job_type:
        propagation[JOB_TYPE_ATTRIBUTE] = string_attribute(job_type)
    kept = [name for name in propagation if name not in caller]
    room = max(0, MAX_MESSAGE_ATTRIBUTES - len(caller))
    dropped = kept[room:]
    attributes = {name: propagation[name] for name in kept[:room]}
    attributes.update(caller)
    return attributes, dropped


def message_size(body: str, attributes: MessageAttributes) -> int:
    """Return the size SQS counts against MaximumMessageSize, in bytes."""
    size = len(body.encode())
    for name, attribute in attributes.items():
        size += len(name.encode()) + len(str(attribute.get("DataType", "")).encode())
        value = attribute.get("StringValue")
        if value is None:
            value = attribute.get("BinaryValue", b"")
        size += (
            len(value)
            if isinstance(value, bytes | bytearray)
            else len(str(value).encode())
        )
    return size


@dataclasses.dataclass(frozen=True)
class DecodedBody:
    """A body that names a job: what the consumer needs from it."""

    job_type: str
    payload: JSONObject
    #: The ``run_at`` value as sent, or None.
    run_at: str | None
    #: The ``job_id`` value as sent (any JSON value, unchecked), or None.
    job_id: object = None
    #: The ``scheduled_for`` value as sent (any JSON value, unchecked), or None.
    scheduled_for: object = None
    #: The ``max_runtime_seconds`` value as sent (any JSON value, unchecked), or None.
    max_runtime_seconds: object = None
    #: The ``unique`` value as sent (any JSON value, unchecked), or None.
    unique: object = None
    #: The ``expires_at`` value as sent (any JSON value, unchecked), or None.
    expires_at: object = None
    #: The valid ``tags`` as sent (:func:`received_tags`).
    tags: tuple[str, ...] = ()


#: Why a body is not a job, as :func:`decode_body` says it, and the short code
#: of each (the ``reason`` label of ``sqs_jobs_malformed_total``).
MALFORMED_BODY_CODES = {
    "body is not text": "not_text",
    "body is not JSON": "not_json",
    BODY_TOO_DEEP: "too_deep",
    "body is not a JSON object": "not_object",
    "job_type is missing or not a string": "bad_job_type",
    "payload is missing or not a JSON object": "bad_payload",
}
_NOT_TEXT, _NOT_JSON, _TOO_DEEP, _NOT_OBJECT, _BAD_JOB_TYPE, _BAD_PAYLOAD = (
    MALFORMED_BODY_CODES
)


def decode_body(body: object) -> DecodedBody | str:
    """Decode a message body, or return why it is not a job.

    Never raises: any input gives either a :class:`DecodedBody` or a short
    reason (``"body is not JSON"``, ...; the keys of
    :data:`MALFORMED_BODY_CODES`), so a poison message cannot crash the worker.
    """
    if not isinstance(body, str):
        return _NOT_TEXT
    if nested_deeper_than(body, MAX_BODY_DEPTH):
        return _TOO_DEEP
    try:
        data = json.loads(body)
    except ValueError:
        return _NOT_JSON
    except RecursionError:  # only below the default recursion limit
        return _TOO_DEEP
    if not isinstance(data, dict):
        return _NOT_OBJECT
    job_type = data.get("job_type")
    if not isinstance(job_type, str):
        return _BAD_JOB_TYPE
    payload = data.get("payload")
    if not isinstance(payload, dict):
        return _BAD_PAYLOAD
    run_at = data.get("run_at")
    return DecodedBody(
        job_type,
        payload,
        run_at if isinstance(run_at, str) else None,
        data.get("job_id"),
        data.get(SCHEDULED_FOR),
        data.get(MAX_RUNTIME),
        data.get(UNIQUE),
        data.get(EXPIRES_AT),
        received_tags(data.get(TAGS)),
    )


def scheduled_for(attributes: object, body_value: object) -> dt.datetime | None:
    """A periodic job's tick: the ``scheduled_for`` attribute, else the body key."""
    value = body_value
    if isinstance(attributes, dict):
        attribute = attributes.get(SCHEDULED_FOR)
        if isinstance(attribute, dict) and isinstance(
            attribute.get("StringValue"), str
        ):
            value = attribute["StringValue"]
    return parse_run_at(value) if isinstance(value, str) else None


def decode_attributes(attributes: object) -> tuple[JSONObject, dict[str, str]]:
    """Return the correlation fields and trace headers of a received message.

    Anything malformed is skipped: correlation fields that are not a JSON
    object are ignored, and only String attributes become trace headers.
    """
    correlation_fields: JSONObject = {}
    trace_headers: dict[str, str] = {}
    if not isinstance(attributes, dict):
        return correlation_fields, trace_headers
    for name, attribute in attributes.items():
        if not isinstance(attribute, dict):
            continue
        value = attribute.get("StringValue")
        data_type = attribute.get("DataType")
        if not isinstance(value, str) or not isinstance(data_type, str):
            continue
        if not data_type.startswith("String"):
            continue
        if name == CORRELATION_FIELDS_ATTRIBUTE:
            try:
                decoded = loads_bounded(value)
            except ValueError:
                continue
            if isinstance(decoded, dict):
                correlation_fields = decoded
        elif name not in _RESERVED_ATTRIBUTES:
            trace_headers[name] = value
    return correlation_fields, trace_headers
