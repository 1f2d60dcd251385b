"""Check caller-given message attributes against SQS's rules, before any send.

SQS (and botocore before it) refuses a malformed attribute with its own error
only once the job is on its way; these checks give a ``TypeError`` or
``ValueError`` that names the attribute and the fix instead.

Rules: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html
"""

from __future__ import annotations

import decimal
import re

from ..model import MAX_MESSAGE_ATTRIBUTES
from ._wire import MessageAttributes

#: The longest attribute name (and data type) SQS accepts.
MAX_NAME_LENGTH = 256

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_RESERVED_PREFIXES = ("aws.", "amazon.")
#: ``String``, ``Number`` or ``Binary``, optionally with a custom label
#: (``Number.float``).
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]+)?")
#: Characters SQS refuses in a String value (surrogates, the two non-characters
#: and the C0 controls other than tab, newline and carriage return).
_INVALID_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_EXAMPLE = "{'DataType': 'String', 'StringValue': 'x'}"


def check_message_attributes(attributes: object) -> MessageAttributes | None:
    """Return ``attributes`` (a copy) once every name and value is one SQS accepts.

    :raises TypeError: a name or value has the wrong type.
    :raises ValueError: a name, data type or value breaks an SQS rule.
    """
    if attributes is None:
        return None
    if not isinstance(attributes, dict):
        raise TypeError(
            f"message_attributes must be a dict of name -> {_EXAMPLE};"
            f" got {type(attributes).__name__}"
        )
    if len(attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise ValueError(
            f"message_attributes has {len(attributes)} attributes; SQS allows at most"
            f" {MAX_MESSAGE_ATTRIBUTES} per message"
        )
    for name, attribute in attributes.items():
        _check_name(name)
        _check_attribute(name, attribute)
    return dict(attributes)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"message attribute names must be non-empty str; got {name!r}")
    problem = None
    if len(name) > MAX_NAME_LENGTH:
        problem = f"is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    elif not _NAME.fullmatch(name):
        problem = "may hold only letters, digits, '_', '-' and '.'"
    elif name.lower().startswith(_RESERVED_PREFIXES):
        problem = "may not start with 'AWS.' or 'Amazon.' (reserved by AWS)"
    elif name.startswith(".") or name.endswith(".") or ".." in name:
        problem = "may not start or end with '.', nor hold '..'"
    if problem is not None:
        raise ValueError(f"message attribute name {name!r} {problem}")


def _check_attribute(name: str, attribute: object) -> None:
    if not isinstance(attribute, dict) or not isinstance(
        attribute.get("DataType"), str
    ):
        raise ValueError(
            f"message attribute {name!r} must be a dict with a 'DataType' (String,"
            f" Number or Binary) and its value, e.g. {_EXAMPLE}; got {attribute!r}"
        )
    data_type = attribute["DataType"]
    if len(data_type) > MAX_NAME_LENGTH or not _DATA_TYPE.fullmatch(data_type):
        raise ValueError(
            f"message attribute {name!r}: DataType must be String, Number or Binary,"
            f" optionally with a custom label such as 'Number.float'; got {data_type!r}"
        )
    key = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
    unexpected = sorted(str(k) for k in attribute if k not in ("DataType", key))
    if unexpected or key not in attribute:
        raise ValueError(
            f"message attribute {name!r} of DataType {data_type!r} must have exactly"
            f" 'DataType' and {key!r}; got the keys {sorted(map(str, attribute))}"
        )
    value = attribute[key]
    if key == "BinaryValue":
        if not isinstance(value, bytes | bytearray):
            raise TypeError(
                f"message attribute {name!r}: BinaryValue must be bytes;"
                f" got {type(value).__name__}"
            )
    elif not isinstance(value, str):
        raise TypeError(
            f"message attribute {name!r}: StringValue must be a str (send numbers as"
            f" text, e.g. '5'); got {type(value).__name__}"
        )
    if not value:
        raise ValueError(f"message attribute {name!r}: the value may not be empty")
    if isinstance(value, str):
        _check_text(name, data_type, value)


def _check_text(name: str, data_type: str, value: str) -> None:
    if _INVALID_CHARS.search(value):
        raise ValueError(
            f"message attribute {name!r}: StringValue holds characters SQS refuses"
            " (control characters, lone surrogates, U+FFFE or U+FFFF)"
        )
    if data_type.startswith("Number"):
        try:
            number = decimal.Decimal(value)
        except decimal.InvalidOperation:
            number = None
        if number is None or not number.is_finite() or value != value.strip():
            raise ValueError(
                f"message attribute {name!r}: a Number's StringValue must be a"
                f" decimal number such as '42' or '-1.5'; got {value!r}"
            )
