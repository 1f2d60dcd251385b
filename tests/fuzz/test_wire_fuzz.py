"""Hostile message bodies and attributes: the decoders never raise.

``tests/engine/test_wire_properties.py`` holds the properties of the wire
format; this adds what an attacker with ``sqs:SendMessage`` may send.
"""

from __future__ import annotations

import datetime as dt
import json

from flask_sqs_jobs.engine.sqs import parse_run_at
from flask_sqs_jobs.engine.sqs._wire import decode_attributes
from flask_sqs_jobs.engine.sqs._wire import decode_body
from flask_sqs_jobs.engine.sqs._wire import DecodedBody
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ
from tests.fuzz.strategies import hostile_text
from tests.fuzz.strategies import hostile_values
from tests.fuzz.strategies import json_text

#: A body shaped like a job, with hostile fields.
job_like = st.fixed_dictionaries(
    {},
    optional={
        "job_type": hostile_values,
        "payload": hostile_values,
        "run_at": hostile_values,
        "version": hostile_values,
    },
).map(lambda d: json.dumps(d, default=repr))

attribute = st.fixed_dictionaries(
    {},
    optional={
        "DataType": hostile_values,
        "StringValue": hostile_values,
        "BinaryValue": hostile_values,
    },
)


@FUZZ
@given(st.one_of(json_text, job_like, hostile_values))
def test_decode_body_gives_a_job_or_a_short_reason(body: object) -> None:
    result = decode_body(body)

    if isinstance(result, DecodedBody):
        assert isinstance(result.job_type, str)
        assert isinstance(result.payload, dict)
    else:
        assert isinstance(result, str)
        assert 0 < len(result) <= 500


@FUZZ
@given(
    st.one_of(
        hostile_values,
        st.dictionaries(hostile_text, attribute | hostile_values, max_size=12),
    )
)
def test_decode_attributes_gives_json_fields_and_string_headers(
    attributes: object,
) -> None:
    fields, headers = decode_attributes(attributes)

    assert isinstance(fields, dict)
    json.dumps(fields)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())


@FUZZ
@given(hostile_text)
def test_parse_run_at_gives_an_aware_datetime_or_none(value: str) -> None:
    parsed = parse_run_at(value)

    assert parsed is None or parsed.utcoffset() == dt.timedelta(0)
